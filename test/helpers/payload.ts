import { createHash } from 'node:crypto';

/** The 64 KiB block big.php repeats: byte i is (i*7+3) & 0xff. */
export function bigBlock(): Buffer {
  const b = Buffer.allocUnsafe(65536);
  for (let i = 0; i < 65536; i++) b[i] = (i * 7 + 3) & 0xff;
  return b;
}

/** sha256 hex of what big.php?mb=N sends. */
export function bigSha256(mb: number): string {
  const h = createHash('sha256');
  const block = bigBlock();
  for (let i = 0; i < mb * 16; i++) h.update(block);
  return h.digest('hex');
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Pseudo-random bytes from a seed (xorshift), so a failing run can be repeated exactly. */
export function seededBytes(n: number, seed = 12345): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}
