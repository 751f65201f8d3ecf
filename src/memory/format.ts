/** Sizes for log messages: "51.3MiB", "812KiB", "2.00GiB". Log fields carry the exact bytes. */
export function formatBytes(n: number): string {
  const a = Math.abs(n);
  if (a >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)}GiB`;
  if (a >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)}MiB`;
  if (a >= 1024) return `${Math.round(n / 1024)}KiB`;
  return `${n}B`;
}
