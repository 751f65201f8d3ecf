/**
 * Where a config problem is written: "file:line: key.path: message". The schema (pure)
 * and the host checks (src/daemon/preflight.ts) report through the same list, with the
 * lines load.ts found in the YAML.
 */

export type KeyPath = ReadonlyArray<string | number>;

export interface Locator {
  /** 1-based line where the key (or list item) at this path is written, if it is. */
  line(path: KeyPath): number | undefined;
  /** A scalar's text as written (e.g. "0660" where YAML made the number 660). */
  raw(path: KeyPath): string | undefined;
}

/** Where a Config came from, kept so later checks can name lines too. */
export interface ConfigOrigin {
  /** The file as the user wrote it (or '<command line>'). */
  label: string;
  locate: Locator | undefined;
}

export function formatKeyPath(path: KeyPath): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? p : `.${p}`;
  return out;
}

export class Problems {
  private readonly list: Array<{ line: number; order: number; text: string; path: KeyPath }> = [];

  constructor(
    private readonly label: string,
    private readonly locate: Locator | undefined,
  ) {}

  get count(): number {
    return this.list.length;
  }

  add(path: KeyPath, message: string): void {
    const line = this.lineOf(path);
    const where = line === undefined ? this.label : `${this.label}:${line}`;
    const key = formatKeyPath(path);
    this.list.push({ line: line ?? Infinity, order: this.list.length, text: key === '' ? `${where}: ${message}` : `${where}: ${key}: ${message}`, path });
  }

  /** The key paths of the problems added since there were `count`. */
  pathsSince(count: number): KeyPath[] {
    return this.list.slice(count).map((p) => p.path);
  }

  raw(path: KeyPath): string | undefined {
    return this.locate?.raw(path);
  }

  /** In file order, so they read top to bottom. */
  texts(): string[] {
    return [...this.list].sort((a, b) => a.line - b.line || a.order - b.order).map((p) => p.text);
  }

  private lineOf(path: KeyPath): number | undefined {
    if (!this.locate) return undefined;
    for (let n = path.length; n >= 0; n--) {
      const l = this.locate.line(path.slice(0, n));
      if (l !== undefined) return l;
    }
    return undefined;
  }
}
