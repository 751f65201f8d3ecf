/**
 * strftime for access-log times and the PHP-FPM status page: a fixed subset, local time.
 * Pure. The default pattern is PHP-FPM's (and Apache's CLF without brackets):
 * "30/Nov/2025:06:08:00 +0000".
 */

export const CLF_PATTERN = '%d/%b/%Y:%H:%M:%S %z';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/** "+0100" style offset of local time at `d`. */
export function tzOffset(d: Date): string {
  const off = -d.getTimezoneOffset();
  const sign = off < 0 ? '-' : '+';
  const a = Math.abs(off);
  return `${sign}${pad(Math.floor(a / 60))}${pad(a % 60)}`;
}

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  return Math.floor((d.getTime() - start.getTime()) / 86_400_000) + 1;
}

/** Formats epoch ms with a strftime pattern; also the names iso, sec and msec. */
export function formatTime(epochMs: number, pattern: string = CLF_PATTERN): string {
  if (pattern === 'iso') return new Date(epochMs).toISOString();
  if (pattern === 'sec') return String(Math.floor(epochMs / 1000));
  if (pattern === 'msec') return (epochMs / 1000).toFixed(3);
  const d = new Date(epochMs);
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '%' || i + 1 >= pattern.length) {
      out += c;
      continue;
    }
    const f = pattern[++i]!;
    switch (f) {
      case 'Y': out += d.getFullYear(); break;
      case 'm': out += pad(d.getMonth() + 1); break;
      case 'd': out += pad(d.getDate()); break;
      case 'e': out += String(d.getDate()).padStart(2, ' '); break;
      case 'H': out += pad(d.getHours()); break;
      case 'M': out += pad(d.getMinutes()); break;
      case 'S': out += pad(d.getSeconds()); break;
      case 'z': out += tzOffset(d); break;
      case 'b': out += MONTHS[d.getMonth()]; break;
      case 'a': out += DAYS[d.getDay()]; break;
      case 'j': out += pad(dayOfYear(d), 3); break;
      case 's': out += Math.floor(epochMs / 1000); break;
      case 'F': out += `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`; break;
      case 'T': out += `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; break;
      case '%': out += '%'; break;
      default: out += '%' + f;
    }
  }
  return out;
}
