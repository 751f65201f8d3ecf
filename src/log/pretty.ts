/**
 * Human log lines for a terminal, as a pino destination: pino still builds its JSON line
 * (so fields and serializers are the same in both formats); this stream turns it into
 *
 *   10:02:03.456 WARN  worker killed after request_timeout  code=ERR_REQUEST_TIMEOUT pool=www worker=3
 *
 * time (UTC, as in the JSON), level, message, then key=value pairs with `code` first.
 * Further lines of a multi-line message or value (a traceback) follow, indented.
 * In-house rather than pino-pretty: a few dozen lines against several packages loaded
 * at every start.
 */
import type { DestinationStream } from 'pino';

const LEVELS: Record<number, [name: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '90'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};
/** Said by the line's layout, or the daemon's own pid on every line: not repeated as pairs. */
const OMIT = new Set(['time', 'level', 'msg', 'pid', 'hostname', 'code']);
const INDENT = '    ';

function scalar(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (v !== null && typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function indented(text: string): string {
  return text.split('\n').map((l) => `${INDENT}${l}\n`).join('');
}

/** One pino JSON line → one human entry (a line, plus indented lines for multi-line text). */
export function formatPretty(json: string, color = false): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`; // not ours to reshape
  }
  const time = typeof o.time === 'string' ? o.time.slice(11, 23) : typeof o.time === 'number' ? new Date(o.time).toISOString().slice(11, 23) : '';
  const [name, c] = LEVELS[o.level as number] ?? [String(o.level), '0'];
  const level = color ? `\x1b[${c}m${name}\x1b[0m` : name;
  const [first = '', ...more] = String(o.msg ?? '').split('\n');
  const pairs: string[] = o.code === undefined ? [] : [`code=${scalar(o.code)}`];
  let below = more.length > 0 ? indented(more.join('\n')) : '';
  for (const [k, v] of Object.entries(o)) {
    if (OMIT.has(k)) continue;
    if (k === 'err' && v !== null && typeof v === 'object') {
      const err = v as { message?: unknown; stack?: unknown };
      pairs.push(`err=${scalar(err.message)}`);
      if (typeof err.stack === 'string') below += indented(err.stack);
    } else if (typeof v === 'string' && v.includes('\n')) {
      pairs.push(`${k}=↓`);
      below += indented(v);
    } else {
      pairs.push(`${k}=${scalar(v)}`);
    }
  }
  return `${time} ${level} ${first}${pairs.length > 0 ? `  ${pairs.join(' ')}` : ''}\n${below}`;
}

export interface PrettyOptions {
  /** ANSI colour for the level (a terminal without NO_COLOR). */
  color?: boolean;
}

/** Wraps `dest` (stdout's SonicBoom, say) so that each line pino writes arrives formatted. */
export function prettyStream(dest: DestinationStream, opts: PrettyOptions = {}): DestinationStream & { flush(cb?: (err?: Error) => void): void } {
  const inner = dest as DestinationStream & { flush?: (cb?: (err?: Error) => void) => void };
  return {
    write: (line: string) => inner.write(formatPretty(line, opts.color === true)),
    flush: (cb) => (inner.flush !== undefined ? inner.flush(cb) : cb?.()),
  };
}
