/**
 * A listener's `params` (extra or overriding CGI variables), flattened once at start so
 * the per-request cost is a loop over a short array, nothing when there are none.
 */
import type { CgiParams } from '../protocol/params.js';

export type ParamsOverride = readonly string[];

export function compileOverride(params: Record<string, string>): ParamsOverride {
  const flat: string[] = [];
  for (const [k, v] of Object.entries(params)) flat.push(k, v);
  return flat;
}

/** Applied last, so the listener's values win over what the client sent (every copy of a name). */
export function applyOverride(p: CgiParams, o: ParamsOverride): void {
  if (o.length > 0) p.override(o);
}
