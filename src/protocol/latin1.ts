/**
 * Writing request variables (latin1 strings: one byte per char) into encoder buffers,
 * shared by the FastCGI and SCGI codecs.
 */

/** Below this length a JS loop beats a call into Buffer.write (measured: about 2.5x for names). */
const SHORT_STRING = 32;

/** Writes a latin1 string at `off` and returns the offset after it (chars above 0xFF keep their low byte, as Buffer does). */
export function writeLatin1(buf: Buffer, off: number, s: string): number {
  const n = s.length;
  if (n < SHORT_STRING) {
    for (let i = 0; i < n; i++) buf[off + i] = s.charCodeAt(i);
    return off + n;
  }
  return off + buf.write(s, off, 'latin1');
}
