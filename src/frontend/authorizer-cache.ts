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
  /** When it last served a request: the least recently used goes first when the cache is full. */
  used: number;
}

export class AuthorizerCache {
  private readonly parts: CacheKeyPart[];
  /**
   * A hit only stamps its grant: a delete and set per request to keep the Map in use
   * order would churn its tables in the old generation (src/protocol/dense-set.ts). The
   * least recently used is searched for only when a new grant finds the cache full.
   */
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
    if (g.expires <= now) {
      this.grants.delete(key);
      return undefined;
    }
    g.used = now;
    return g.variables;
  }

  put(key: string, variables: readonly string[], now: number): void {
    const g = this.grants.get(key);
    if (g !== undefined) {
      g.variables = variables;
      g.expires = now + this.ttlMs;
      g.used = now;
      return;
    }
    while (this.grants.size >= this.maxEntries) this.forgetLeastRecentlyUsed();
    this.grants.set(key, { variables, expires: now + this.ttlMs, used: now });
  }

  private forgetLeastRecentlyUsed(): void {
    let oldest: string | undefined;
    let at = Infinity;
    for (const [k, g] of this.grants) {
      if (g.used < at) {
        at = g.used;
        oldest = k;
      }
    }
    this.grants.delete(oldest!);
  }
}
