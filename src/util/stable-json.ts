/** JSON with keys sorted and undefined left out: equal values give equal text (Maps as objects). */
export function stable(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (x instanceof Map) return Object.fromEntries(x);
    if (x !== null && typeof x === 'object' && !Array.isArray(x)) {
      return Object.fromEntries(Object.entries(x as Record<string, unknown>).filter(([, y]) => y !== undefined).sort(([a], [b]) => a.localeCompare(b)));
    }
    return x;
  });
}
