/**
 * Host name → site: exact names in one Map (O(1)), "*.suffix" wildcards in another,
 * tried from the longest suffix of the host down (so "*.a.example.org" beats
 * "*.example.org"), one Map lookup per label. Pure.
 */
import type { SiteConfig } from '../../config/types.js';

export interface IndexProblem {
  site: SiteConfig;
  message: string;
}

export class SiteIndex {
  private readonly exact = new Map<string, SiteConfig>();
  /** ".example.org" for "*.example.org". */
  private readonly wild = new Map<string, SiteConfig>();

  /**
   * Sites in id order; a site naming a host an earlier one has is left out and
   * reported (so which one wins does not depend on file-system order).
   */
  static build(sites: Iterable<SiteConfig>): { index: SiteIndex; problems: IndexProblem[] } {
    const index = new SiteIndex();
    const problems: IndexProblem[] = [];
    for (const site of [...sites].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
      const clash = site.names.find((n) => index.owner(n) !== undefined);
      if (clash !== undefined) {
        problems.push({ site, message: `${site.origin}: names: "${clash}" is already a name of site ${index.owner(clash)!.id}; this site is left out` });
        continue;
      }
      for (const n of site.names) {
        if (n.startsWith('*.')) index.wild.set(n.slice(1), site);
        else index.exact.set(n, site);
      }
    }
    return { index, problems };
  }

  private owner(name: string): SiteConfig | undefined {
    return name.startsWith('*.') ? this.wild.get(name.slice(1)) : this.exact.get(name);
  }

  /** The site serving `host` (as sent: any case, a port, a trailing dot), if any. */
  lookup(host: string): SiteConfig | undefined {
    const name = hostName(host);
    const hit = this.exact.get(name);
    if (hit !== undefined || this.wild.size === 0) return hit;
    for (let i = name.indexOf('.'); i >= 0; i = name.indexOf('.', i + 1)) {
      const w = this.wild.get(name.slice(i));
      if (w !== undefined) return w;
    }
    return undefined;
  }
}

/** "Example.ORG:8080" → "example.org"; "[::1]:80" → "[::1]". */
export function hostName(host: string): string {
  let h = host;
  if (h.charCodeAt(0) === 91 /* [ */) {
    const end = h.indexOf(']');
    return end < 0 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(':');
  if (colon >= 0) h = h.slice(0, colon);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return /[A-Z]/.test(h) ? h.toLowerCase() : h;
}
