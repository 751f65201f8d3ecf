/**
 * Grants of a pool's authorizer kept for `authorizer_cache` ms, keyed by the values of
 * `authorizer_cache_key` (src/config/authorizer-key.ts for the NAME/N notation).
 * Only grants are kept: a deny is usually a 401 challenge the client answers with new
 * credentials (another key anyway), and a credential just made valid should not stay
 * refused for the cache's time; failures must be asked again. Pure: the caller passes
 * the time. Bounded: the least recently used grant goes first.
 */
import { createHash } from 'node:crypto';
import { keyValue, parseCacheKeyPart, type CacheKeyPart } from '../config/authorizer-key.js';
import type { CgiParams } from '../protocol/params.js';

/** Most grants one guarded pool keeps. */
export const AUTHORIZER_CACHE_ENTRIES = 4096;

interface Grant {
  /** The answer's variables as a flat [name, value, ...] override. */
  variables: readonly string[];
  expires: number;
}

export class AuthorizerCache {
  private readonly parts: CacheKeyPart[];
  /** Map order is use order: the first entry is the least recently used. */
  private readonly grants = new Map<string, Grant>();

  constructor(
    private readonly ttlMs: number,
    key: readonly string[],
    private readonly maxEntries = AUTHORIZER_CACHE_ENTRIES,
  ) {
    // The schema checked the notation and that there is at least one part.
    this.parts = key.map((k) => parseCacheKeyPart(k)).filter((p): p is CacheKeyPart => typeof p !== 'string');
    if (this.parts.length === 0) throw new Error('an authorizer cache needs a key');
  }

  get size(): number {
    return this.grants.size;
  }

  /**
   * The key of a request: a digest of its key values, each length-prefixed and an unset
   * variable told from an empty one, so no two different requests share a key and no
   * credential is kept in memory as it was sent.
   */
  keyOf(params: CgiParams): string {
    const h = createHash('sha256');
    for (const p of this.parts) {
      const v = params.get(p.name);
      if (v === undefined) h.update('-;');
      else {
        const k = keyValue(v, p.segments);
        h.update(`${k.length}:`);
        h.update(k, 'latin1');
      }
    }
    return h.digest('base64');
  }

  /** The variables of a grant still valid at `now`, or undefined. */
  get(key: string, now: number): readonly string[] | undefined {
    const g = this.grants.get(key);
    if (g === undefined) return undefined;
    this.grants.delete(key);
    if (g.expires <= now) return undefined;
    this.grants.set(key, g); // now the most recently used
    return g.variables;
  }

  put(key: string, variables: readonly string[], now: number): void {
    this.grants.delete(key);
    while (this.grants.size >= this.maxEntries) this.grants.delete(this.grants.keys().next().value!);
    this.grants.set(key, { variables, expires: now + this.ttlMs });
  }
}
