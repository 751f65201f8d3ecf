/**
 * authorizer_cache_key entries: a variable name, or NAME/N for the first N path
 * segments of its value with the query cut off (REQUEST_URI/2: "/shop/admin" of
 * "/shop/admin/orders?page=3"). Pure; the schema checks the notation with it and the
 * cache (src/frontend/authorizer-cache.ts) builds keys from what it returns.
 */

export interface CacheKeyPart {
  /** The request variable. */
  name: string;
  /** Path segments kept; undefined = the whole value. */
  segments: number | undefined;
}

const ENTRY = /^([A-Za-z_][A-Za-z0-9_]*)(?:\/([1-9][0-9]?))?$/;

/** The part an entry names, or why it is not one. */
export function parseCacheKeyPart(entry: string): CacheKeyPart | string {
  const m = ENTRY.exec(entry);
  if (m === null) return `must be a variable name (HTTP_AUTHORIZATION) or NAME/N with N from 1 to 99 path segments (REQUEST_URI/2), got ${JSON.stringify(entry)}`;
  return { name: m[1]!, segments: m[2] === undefined ? undefined : Number(m[2]) };
}

/** The value as the key uses it: the first `segments` path segments, query and fragment cut off. */
export function keyValue(value: string, segments: number | undefined): string {
  if (segments === undefined) return value;
  let end = value.length;
  for (const c of ['?', '#']) {
    const at = value.indexOf(c);
    if (at >= 0 && at < end) end = at;
  }
  // "/a/b/c": the n-th segment ends before the (n+1)-th slash.
  let slashes = 0;
  for (let i = 0; i < end; i++) {
    if (value.charCodeAt(i) === 47 && i > 0 && ++slashes === segments) return value.slice(0, i);
  }
  return value.slice(0, end);
}
