/**
 * CGI/1.1 request variables as they travel between front end and backend.
 *
 * Names and values are latin1 ("binary") strings: one char per byte, so any byte
 * sequence a front end sends reaches the backend unchanged, and decoding costs no
 * UTF-8 validation on the hot path. Use `Buffer.from(v, 'latin1').toString('utf8')`
 * where text is wanted (logs).
 */
export class CgiParams {
  /** Flat [name0, value0, name1, value1, ...]; order is kept for pass-through. */
  protected flat: string[];

  constructor(flat: string[] = []) {
    this.flat = flat;
  }

  static fromObject(obj: Record<string, string>): CgiParams {
    const flat: string[] = [];
    for (const [k, v] of Object.entries(obj)) flat.push(k, v);
    return new CgiParams(flat);
  }

  get size(): number {
    return this.flat.length >> 1;
  }

  get(name: string): string | undefined {
    const f = this.flat;
    for (let i = 0; i < f.length; i += 2) if (f[i] === name) return f[i + 1];
    return undefined;
  }

  /** Replaces the first pair with that name, or appends one. */
  set(name: string, value: string): void {
    const f = this.flat;
    for (let i = 0; i < f.length; i += 2) {
      if (f[i] === name) {
        f[i + 1] = value;
        return;
      }
    }
    f.push(name, value);
  }

  delete(name: string): void {
    const f = this.flat;
    for (let i = 0; i < f.length; i += 2) {
      if (f[i] === name) {
        f.splice(i, 2);
        return;
      }
    }
  }

  /**
   * Sets each name of a flat [name, value, ...] list (a listener's `params`) as its only
   * pair: a client that sends a name twice cannot slip a second value past it to a
   * backend where the last one wins (php-cgi).
   */
  override(o: readonly string[]): void {
    const f = this.flat;
    for (let j = 0; j < o.length; j += 2) {
      const name = o[j]!;
      let kept = false;
      for (let i = 0; i < f.length; ) {
        if (f[i] !== name) i += 2;
        else if (kept) f.splice(i, 2);
        else {
          f[i + 1] = o[j + 1]!;
          kept = true;
          i += 2;
        }
      }
      if (!kept) f.push(name, o[j + 1]!);
    }
  }

  /** A copy without the pairs of those names (the request an authorizer is asked about). */
  without(names: ReadonlySet<string>): CgiParams {
    const kept: string[] = [];
    this.forEach((name, value) => {
      if (!names.has(name)) kept.push(name, value);
    });
    return new CgiParams(kept);
  }

  /** Calls fn for every pair in order. */
  forEach(fn: (name: string, value: string) => void): void {
    const f = this.flat;
    for (let i = 0; i < f.length; i += 2) fn(f[i]!, f[i + 1]!);
  }

  toObject(): Record<string, string> {
    const o: Record<string, string> = {};
    this.forEach((k, v) => {
      if (!(k in o)) o[k] = v;
    });
    return o;
  }

  /** The raw flat array; codecs read it directly. Do not mutate. */
  get pairs(): readonly string[] {
    return this.flat;
  }
}

/** Limits every decoder of request variables enforces (FastCGI PARAMS, SCGI header). */
export interface ParamsLimits {
  /** Total bytes of encoded names and values. Default 64 KiB. */
  maxBytes: number;
  /** Number of pairs. Default 1000. */
  maxCount: number;
}

export const DEFAULT_PARAMS_LIMITS: ParamsLimits = { maxBytes: 64 * 1024, maxCount: 1000 };
