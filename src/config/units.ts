/**
 * Durations and sizes as operators write them.
 *
 * Durations: "500ms", "10s", "5m", "1h", "1d", combinations such as "1m30s",
 * fractions such as "1.5s", and spelt-out units ("10 minutes", "2 sec"). A bare
 * number (10 or "10") means SECONDS, as in PHP-FPM's request_terminate_timeout.
 * The result is whole milliseconds.
 *
 * Sizes: "64KiB", "32MiB", "1GiB", and the php.ini spellings "64K", "64KB", "64M",
 * "1G". K/M/G (with or without B, any case) are BINARY multiples like php.ini's
 * memory_limit: "64KB" is 65,536 bytes, never 64,000. A bare number means bytes.
 *
 * Pure; each parser returns the value or a message saying what is wrong (the same
 * convention as parseAddress in src/protocol/address.ts).
 */

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  msec: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
};

const DURATION_PART = /(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)/y;

/** Milliseconds, or an error message. */
export function parseDuration(input: unknown): number | string {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) return `must be a duration ≥ 0 such as "30s", got ${show(input)}`;
    return Math.round(input * 1000);
  }
  if (typeof input !== 'string') return `must be a duration such as "500ms", "10s", "5m" or "1h", got ${show(input)}`;
  const s = input.trim().toLowerCase();
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s) * 1000);
  if (s === '') return `must be a duration such as "500ms", "10s", "5m" or "1h", got ""`;
  let total = 0;
  let pos = 0;
  let lastUnit = Infinity;
  while (pos < s.length) {
    DURATION_PART.lastIndex = pos;
    const m = DURATION_PART.exec(s);
    const unit = m ? DURATION_UNITS[m[2]!] : undefined;
    if (!m || unit === undefined) return `must be a duration such as "500ms", "10s", "5m" or "1h" (units ms, s, m, h, d), got ${show(input)}`;
    // "1m30s" is fine, "30s1m" is almost certainly a typo.
    if (unit >= lastUnit) return `duration units must go from largest to smallest, got ${show(input)}`;
    lastUnit = unit;
    total += Number(m[1]) * unit;
    pos = DURATION_PART.lastIndex;
    while (s[pos] === ' ') pos++;
  }
  return Math.round(total);
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

/** Bytes, or an error message. */
export function parseSize(input: unknown): number | string {
  if (typeof input === 'number') {
    if (!Number.isInteger(input) || input < 0) return `must be a size ≥ 0 in bytes or such as "64KiB", got ${show(input)}`;
    return input;
  }
  if (typeof input !== 'string') return `must be a size such as "64KiB", "32MiB" or "1GiB", got ${show(input)}`;
  const m = /^(\d+(?:\.\d+)?|\.\d+)\s*([a-z]*)$/i.exec(input.trim());
  const mult = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || mult === undefined) return `must be a size such as "64KiB", "32MiB" or "1GiB" (units B, K, M, G, T; binary), got ${show(input)}`;
  if (mult === 1 && m[1]!.includes('.')) return `must be a whole number of bytes, got ${show(input)}`;
  return Math.round(Number(m[1]) * mult);
}

/** The shortest exact spelling: 65536 → "64KiB", 1000 → "1000B". */
export function formatSize(bytes: number): string {
  for (const [unit, mult] of [['TiB', 1024 ** 4], ['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= mult && bytes % mult === 0) return `${bytes / mult}${unit}`;
  }
  return `${bytes}B`;
}

/** The shortest exact spelling: 90000 → "1m30s", 1500 → "1500ms", 0 → "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 1000 !== 0) return `${ms}ms`;
  let rest = ms;
  let out = '';
  for (const [unit, mult] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= mult) {
      out += `${Math.floor(rest / mult)}${unit}`;
      rest %= mult;
    }
  }
  return out;
}

/** A value quoted for an error message. */
export function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || v === undefined) return 'nothing';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  return String(v);
}
