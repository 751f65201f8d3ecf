/**
 * The control socket's protocol: one JSON object per line each way, a response for each
 * request, in order. Requests:
 *   {"cmd":"status"}                      → {"ok":true,"result":<StatusSnapshot>}
 *   {"cmd":"status","processes":true}     (also samples worker CPU/memory)
 *   {"cmd":"status","all_sites":true}     (also lists every defined vhost site)
 *   {"cmd":"reload"}                      → {"ok":true,"result":<ReloadReport>}
 *                                           or {"ok":false,"error":{"code":"ERR_CONFIG_INVALID","message":...,"problems":[...]}}
 *   {"cmd":"stop","timeout_ms":30000}     → {"ok":true,"result":{"stopping":true}}; the
 *                                           connection then closes when the daemon exits
 *   {"cmd":"ping"}                        → {"ok":true,"result":{"pid":123,"version":"...","started":<ms>}}
 *   {"cmd":"ready"}                       → {"ok":true,"result":{"ready":true,"status":200,"reason":"ready"}}
 *                                           (readiness.ts; "pool":"www" for one pool's too)
 *   {"cmd":"warnings"}                    → {"ok":true,"result":[<WarningEntry>]}: the recent
 *                                           warn/error lines (src/log/warning-ring.ts)
 *   {"cmd":"restart","pool":"www"}        → {"ok":true,"result":<ReloadReport>}: the pool's
 *                                           workers replaced by fresh ones the way a reload
 *                                           replaces a changed pool (no request fails)
 *   {"cmd":"restart","pool":"www","rolling":true}
 *                                         → {"ok":true,"result":<PoolActionReport>}: one worker
 *                                           at a time, the next once its replacement is ready
 *   {"cmd":"drain","pool":"www"}          → {"ok":true,"result":<PoolActionReport>}: every worker
 *                                           retired after its request; the mode starts new ones
 *                                           on demand (a static pool: a rolling restart)
 *   {"cmd":"upgrade"}                     → {"ok":true,"result":{"pid":124}} once a new daemon
 *                                           started from the files on disk serves on our sockets;
 *                                           this one then stops after its requests; with
 *                                           upgrade: exec {"pid":123,"exec":true,"started":<ms>}
 *                                           once the new code passed its check: this process
 *                                           execs it after its requests (ping's "started" changes)
 *   {"cmd":"reopen-logs"}                 → {"ok":true,"result":{"files":[...]}}: log files reopened
 * Every answer also says which daemon gave it: "daemon":{"pid":123,"config":"/etc/fcgi-pm.yaml"}
 * (config is "<command line>" for the quick form), so the CLI can tell one daemon from another.
 */

export type ControlCommand = 'status' | 'reload' | 'stop' | 'ping' | 'ready' | 'restart' | 'drain' | 'warnings' | 'upgrade' | 'reopen-logs';

export const CONTROL_COMMANDS: readonly ControlCommand[] = ['status', 'reload', 'stop', 'ping', 'ready', 'restart', 'drain', 'warnings', 'upgrade', 'reopen-logs'];

export interface ControlRequest {
  cmd: ControlCommand;
  /** status: sample worker CPU and memory too. */
  processes?: boolean;
  /** status: list every defined vhost site. */
  all_sites?: boolean;
  /** stop: how long running requests may finish (default shutdown_timeout). */
  timeout_ms?: number;
  /** restart, drain: the pool whose workers are replaced or retired. */
  pool?: string;
  /** restart: one worker at a time instead of the whole pool at once. */
  rolling?: boolean;
}

export interface ControlError {
  code?: string | undefined;
  message: string;
  /** Config problems, one per line ("file:line: key: message"). */
  problems?: string[] | undefined;
}

/** The daemon that answered: its pid and the config file it was started from. */
export interface DaemonIdentity {
  pid: number;
  config: string;
}

export type ControlResponse = ({ ok: true; result: unknown } | { ok: false; error: ControlError }) & { daemon?: DaemonIdentity };

/** Longest request line accepted; a longer one closes the connection. */
export const MAX_REQUEST_LINE = 64 * 1024;

/** Splits a byte stream into lines; calls onLine for each complete one. */
export class LineSplitter {
  private buf = '';

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly limit = Infinity,
  ) {}

  /** False when the pending line is over the limit. */
  push(chunk: string): boolean {
    this.buf += chunk;
    let i: number;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      if (line.trim() !== '') this.onLine(line);
    }
    return this.buf.length <= this.limit;
  }
}

/** Validates a parsed request line. */
export function parseRequest(line: string): ControlRequest | string {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return 'request is not JSON';
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'request must be a JSON object';
  const r = v as Record<string, unknown>;
  if (typeof r.cmd !== 'string' || !CONTROL_COMMANDS.includes(r.cmd as ControlCommand)) return `unknown command ${JSON.stringify(r.cmd)} (known: ${CONTROL_COMMANDS.join(', ')})`;
  if (r.pool !== undefined && typeof r.pool !== 'string') return 'pool must be a string';
  if (r.timeout_ms !== undefined && (typeof r.timeout_ms !== 'number' || !Number.isFinite(r.timeout_ms) || r.timeout_ms < 0)) return 'timeout_ms must be a number ≥ 0';
  if ((r.cmd === 'restart' || r.cmd === 'drain') && (typeof r.pool !== 'string' || r.pool === '')) return `${r.cmd} needs "pool": the name of a pool`;
  return { cmd: r.cmd as ControlCommand, processes: r.processes === true, all_sites: r.all_sites === true, timeout_ms: r.timeout_ms as number | undefined, pool: r.pool as string | undefined, rolling: r.rolling === true };
}
