/**
 * Compiles an access_format (tokens from src/config/access-format.ts) once into a list of
 * small part functions; a line is then one pass over them. Letters are documented in
 * ACCESS_LETTERS and docs/operations.md.
 */
import { parseAccessFormat, type AccessToken } from '../config/access-format.js';
import type { Exchange } from '../protocol/exchange.js';
import { formatTime } from './time-format.js';

/** What a line may need beyond the exchange; set up once by the access logger. */
export interface LineEnv {
  daemonPid: number;
  /** The latest memory (bytes) and CPU (%) sample of a worker, when measured. */
  workerFigures?: ((pid: number) => { memory?: number | undefined; cpu?: number | undefined } | undefined) | undefined;
}

/** One finished request, as every part sees it. */
export interface LineFacts {
  ex: Exchange;
  /** Epoch ms the request arrived and ended. */
  startEpoch: number;
  endEpoch: number;
  durationMs: number;
  status: number;
  slow: boolean;
}

type Part = (f: LineFacts) => string;

/** Request variables are latin1 byte strings; show UTF-8 text where there is any. */
export function paramText(s: string | undefined): string {
  if (s === undefined) return '';
  // A char loop, not a regex: this runs for several fields of every logged request.
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.from(s, 'latin1').toString('utf8');
  return s;
}

function orDash(s: string | undefined): string {
  return s === undefined || s === '' ? '-' : s;
}

function uriParts(ex: Exchange): { path: string; query: string } {
  const uri = ex.params.get('REQUEST_URI');
  if (uri !== undefined && uri !== '') {
    const q = uri.indexOf('?');
    return q < 0 ? { path: paramText(uri), query: '' } : { path: paramText(uri.slice(0, q)), query: paramText(uri.slice(q + 1)) };
  }
  return { path: paramText((ex.params.get('SCRIPT_NAME') ?? '') + (ex.params.get('PATH_INFO') ?? '')), query: paramText(ex.params.get('QUERY_STRING')) };
}

function part(tok: Extract<AccessToken, { kind: 'field' }>, env: LineEnv): Part {
  const arg = tok.arg;
  const figures = (f: LineFacts): { memory?: number | undefined; cpu?: number | undefined } | undefined => {
    const pid = f.ex.workerPid;
    return pid === undefined || env.workerFigures === undefined ? undefined : env.workerFigures(pid);
  };
  switch (tok.letter) {
    case 'R': return (f) => orDash(f.ex.params.get('REMOTE_ADDR'));
    case 'u': return (f) => orDash(paramText(f.ex.params.get('REMOTE_USER')));
    case 't': return (f) => formatTime(f.startEpoch, arg);
    case 'T': return (f) => formatTime(f.endEpoch, arg);
    case 'm': return (f) => orDash(paramText(f.ex.params.get('REQUEST_METHOD')));
    case 'r': return (f) => uriParts(f.ex).path;
    case 'q': return (f) => uriParts(f.ex).query;
    case 'Q': return (f) => (uriParts(f.ex).query === '' ? '' : '?');
    case 'U': {
      return (f) => {
        const u = uriParts(f.ex);
        return u.query === '' ? u.path : `${u.path}?${u.query}`;
      };
    }
    case 's': return (f) => String(f.status);
    case 'd': {
      if (arg === 'milli' || arg === 'mili') return (f) => f.durationMs.toFixed(3);
      if (arg === 'micro') return (f) => String(Math.round(f.durationMs * 1000));
      return (f) => (f.durationMs / 1000).toFixed(3);
    }
    case 'M': {
      const div = arg === 'kilo' ? 1024 : arg === 'mega' ? 1024 * 1024 : 1;
      return (f) => {
        const m = figures(f)?.memory;
        return m === undefined ? '-' : String(Math.round(m / div));
      };
    }
    case 'C': return (f) => {
      const c = figures(f)?.cpu;
      return c === undefined ? '-' : c.toFixed(2);
    };
    case 'l': return (f) => f.ex.params.get('CONTENT_LENGTH') || '0';
    case 'f': return (f) => orDash(paramText(f.ex.params.get('SCRIPT_FILENAME')));
    case 'n': return (f) => orDash(f.ex.pool);
    case 'p': return (f) => (f.ex.workerPid === undefined ? '-' : String(f.ex.workerPid));
    case 'P': {
      const pid = String(env.daemonPid);
      return () => pid;
    }
    case 'e': {
      const name = arg ?? '';
      return (f) => orDash(paramText(f.ex.params.get(name)));
    }
    case 'b': return (f) => String(f.ex.bytesOut);
    case 'E': return (f) => f.ex.error?.code ?? '-';
    case 'S': return (f) => (f.slow ? 'slow' : '-');
    case 'k': return (f) => orDash(f.ex.backend);
    case 'z': return (f) => orDash(f.ex.authorization);
    default: return () => '?';
  }
}

/** A function from the facts of one request to its line (no newline). Throws on a bad format. */
export function compileAccessFormat(format: string, env: LineEnv): (f: LineFacts) => string {
  const tokens = parseAccessFormat(format);
  if (typeof tokens === 'string') throw new Error(`access_format: ${tokens}`);
  const parts: Part[] = tokens.map((t) => {
    if (t.kind === 'text') {
      const text = t.text;
      return () => text;
    }
    return part(t, env);
  });
  return (f) => {
    let out = '';
    for (let i = 0; i < parts.length; i++) out += parts[i]!(f);
    return out;
  };
}
