/**
 * One native addon of native/build/ (built at install by scripts/build-native.mjs),
 * loaded on first use and remembered, or why it cannot be: not Linux, or not built.
 */
import { createRequire } from 'node:module';

export interface NativeAddon<T> {
  /** The addon, or undefined (then `problem()` says why). */
  get(): T | undefined;
  /** undefined when the addon loaded; else why not. */
  problem(): string | undefined;
}

/** `name`: the file under native/build/ without .node; `notLinux`: the reason given elsewhere. */
export function nativeAddon<T>(name: string, notLinux: string): NativeAddon<T> {
  const path = new URL(`../../../native/build/${name}.node`, import.meta.url).pathname;
  let addon: T | undefined;
  let why: string | undefined;
  const get = (): T | undefined => {
    if (addon !== undefined || why !== undefined) return addon;
    if (process.platform !== 'linux') {
      why = notLinux;
      return undefined;
    }
    try {
      addon = createRequire(import.meta.url)(path) as T;
    } catch (e) {
      why = `the native addon ${path} is not built (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); run "node scripts/build-native.mjs" with a C compiler and Node's headers`;
    }
    return addon;
  };
  return {
    get,
    problem: () => {
      get();
      return why;
    },
  };
}
