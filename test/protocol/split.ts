// Shared by the codec tests: "decoding is unchanged however the input is cut".
import assert from 'node:assert/strict';
import fc from 'fast-check';

/** Cut points as raw numbers; splitAt maps them into range. */
export const cutsArb = (maxLength = 12): fc.Arbitrary<number[]> => fc.array(fc.nat(), { maxLength });

/** The buffer cut at the given points (taken modulo its length + 1, deduplicated); views, no copies. */
export function splitAt(buf: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  out.push(buf.subarray(prev));
  return out;
}

/** Asserts `decode` gives `want` for `whole` split in two at every offset, and fed one byte at a time. */
export function assertSplitInvariant<T>(whole: Buffer, decode: (chunks: Buffer[]) => T, want: T): void {
  for (let i = 0; i <= whole.length; i++) {
    assert.deepEqual(decode([whole.subarray(0, i), whole.subarray(i)]), want, `split at ${i}`);
  }
  const bytes: Buffer[] = [];
  for (let i = 0; i < whole.length; i++) bytes.push(whole.subarray(i, i + 1));
  assert.deepEqual(decode(bytes), want, 'one byte at a time');
}
