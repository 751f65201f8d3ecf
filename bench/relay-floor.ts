/**
 * The floor: the least a FastCGI relay between a web server and php-cgi can do, as a
 * yardstick for fcgi-pm's proxied path (bench/compare.sh runs it beside fcgi-pm).
 *
 *   node dist/bench/relay-floor.js --listen unix:/tmp/floor.sock [--workers 2] [--php /usr/bin/php-cgi]
 *
 * It spawns N php-cgi (PHP_FCGI_CHILDREN=0, PHP_FCGI_MAX_REQUESTS=0), each listening on
 * its own socket as fd 0, and keeps ONE kept-alive connection to each (FCGI_KEEP_CONN).
 * A request from the front end takes a free worker or waits in a FIFO queue. Bytes go
 * through as they were read; only the 8-byte record headers are looked at: to see where
 * a request begins (BEGIN_REQUEST), to set the keep-conn flag when the front end did not,
 * and to free the worker after its END_REQUEST. Each worker connection carries one
 * request at a time, so the front end's request id is used on it as is: no rewriting.
 * No PARAMS decoding, no STDOUT re-framing, no limits, no timeouts, no multiplexing of
 * one front-end connection (nginx sends one request at a time on each): the floor.
 * Prints "ready" on stdout once every worker is connected; SIGTERM stops it and its workers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listenFd0 } from '../src/worker/socket.js';

const BEGIN_REQUEST = 1;
const END_REQUEST = 3;
const KEEP_CONN = 1;

/**
 * Walks a byte stream record by record without copying it: keeps only the current
 * record's header (which may arrive split) and how far into the record the stream is.
 */
class RecordScanner {
  private head = Buffer.alloc(8);
  private headLen = 0;
  /** Bytes of the current record's body + padding still to come. */
  private left = 0;
  /** Offset into the current record's body + padding. */
  private at = 0;
  type = 0;

  /**
   * Calls onHeader(type, offset of the header in chunk) when a header is complete,
   * onFlags(offset) at the flags byte of a BEGIN_REQUEST body, onEnd(offset after it)
   * when a record ends.
   */
  scan(chunk: Buffer, on: { onHeader?(type: number, start: number): void; onFlags?(offset: number): void; onEnd?(after: number): void }): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.left === 0 && this.headLen < 8) {
        const start = i - this.headLen;
        const n = Math.min(8 - this.headLen, chunk.length - i);
        chunk.copy(this.head, this.headLen, i, i + n);
        this.headLen += n;
        i += n;
        if (this.headLen < 8) return;
        this.type = this.head[1]!;
        this.left = this.head.readUInt16BE(4) + this.head[6]!;
        this.at = 0;
        on.onHeader?.(this.type, Math.max(start, 0));
      } else {
        const n = Math.min(this.left, chunk.length - i);
        if (this.type === BEGIN_REQUEST && this.at <= 2 && this.at + n > 2) on.onFlags?.(i + 2 - this.at);
        this.at += n;
        this.left -= n;
        i += n;
      }
      if (this.left === 0) {
        this.headLen = 0;
        on.onEnd?.(i);
      }
    }
  }
}

interface Request {
  front: Front;
  /** Bytes read before a worker was free. */
  pending: Buffer[];
  worker: Worker | undefined;
  keepConn: boolean;
}

interface Front {
  sock: Socket;
  scanner: RecordScanner;
  current: Request | undefined;
  /** Bytes between requests (a header split across reads): they open the next one. */
  limbo: Buffer[];
  closed: boolean;
}

interface Worker {
  sock: Socket;
  proc: ChildProcess;
  scanner: RecordScanner;
  request: Request | undefined;
}

const free: Worker[] = [];
const queue: Request[] = [];

function assign(w: Worker, r: Request): void {
  w.request = r;
  r.worker = w;
  if (r.pending.length === 1) w.sock.write(r.pending[0]!);
  else if (r.pending.length > 1) w.sock.write(Buffer.concat(r.pending));
  r.pending = [];
}

function release(w: Worker): void {
  const r = w.request!;
  w.request = undefined;
  r.worker = undefined;
  if (r.front.current === r) r.front.current = undefined;
  if (!r.keepConn) r.front.sock.end();
  const next = queue.shift();
  if (next !== undefined) assign(w, next);
  else free.push(w);
}

/** Sends `chunk` on to wherever the request it belongs to goes (its worker, or its queue entry). */
function route(f: Front, chunk: Buffer): void {
  const r = f.current;
  if (chunk.length === 0) return;
  if (r === undefined) f.limbo.push(chunk);
  else if (r.worker !== undefined) r.worker.sock.write(chunk);
  else r.pending.push(chunk);
}

function onFront(sock: Socket): void {
  const f: Front = { sock, scanner: new RecordScanner(), current: undefined, limbo: [], closed: false };
  sock.setNoDelay(true);
  sock.on('data', (chunk: Buffer) => {
    let from = 0;
    f.scanner.scan(chunk, {
      onHeader(type, start) {
        if (type !== BEGIN_REQUEST) return;
        // A new request: what came before it belongs to the previous one.
        route(f, chunk.subarray(from, start));
        from = start;
        f.current = { front: f, pending: f.limbo, worker: undefined, keepConn: true };
        f.limbo = [];
      },
      onFlags(offset) {
        const r = f.current!;
        r.keepConn = (chunk[offset]! & KEEP_CONN) !== 0;
        chunk[offset] = chunk[offset]! | KEEP_CONN; // the worker connection stays open
        if (free.length > 0) assign(free.pop()!, r);
        else queue.push(r);
      },
    });
    route(f, chunk.subarray(from));
  });
  const gone = (): void => {
    f.closed = true;
    const r = f.current;
    // Still queued: drop it. On a worker: its reply is dropped, the worker freed at END_REQUEST.
    const q = r === undefined ? -1 : queue.indexOf(r);
    if (q >= 0) queue.splice(q, 1);
  };
  sock.on('close', gone);
  sock.on('error', () => sock.destroy());
}

function onWorkerData(w: Worker, chunk: Buffer): void {
  let from = 0;
  w.scanner.scan(chunk, {
    onEnd(after) {
      if (w.scanner.type !== END_REQUEST) return;
      const r = w.request!;
      if (!r.front.closed) r.front.sock.write(chunk.subarray(from, after));
      from = after;
      release(w);
    },
  });
  const r = w.request;
  if (r !== undefined && !r.front.closed && from < chunk.length) r.front.sock.write(from === 0 ? chunk : chunk.subarray(from));
}

/** Every php-cgi started, for the exits. */
const all: ChildProcess[] = [];

async function startWorker(dir: string, i: number, php: string): Promise<Worker> {
  const l = await listenFd0(dir, `w${i}`);
  const proc = spawn(php, [], {
    stdio: [l.fd, 'ignore', 'inherit'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' },
  });
  all.push(proc);
  l.handOff();
  const sock = await new Promise<Socket>((resolve, reject) => {
    const s = connect(l.path, () => resolve(s));
    s.once('error', reject);
  });
  sock.setNoDelay(true);
  const w: Worker = { sock, proc, scanner: new RecordScanner(), request: undefined };
  sock.on('data', (c: Buffer) => onWorkerData(w, c));
  sock.on('close', () => {
    // php-cgi drops a new connection that brings no request within 5 s: the floor must be
    // used soon after "ready". The other workers go too, or they would outlive the floor.
    process.stderr.write(`relay-floor: php-cgi ${proc.pid} closed its connection\n`);
    for (const o of all) o.kill('SIGKILL');
    process.exit(1);
  });
  return w;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const get = (name: string, d?: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : d;
  };
  const listen = get('--listen');
  if (listen === undefined) throw new Error('usage: relay-floor --listen unix:/PATH|HOST:PORT [--workers N] [--php /usr/bin/php-cgi]');
  const n = Number(get('--workers', '2'));
  const dir = mkdtempSync(join(tmpdir(), 'relay-floor-'));
  const workers: Worker[] = [];
  const sockPath = listen.startsWith('unix:') ? listen.slice(5) : undefined;
  const stop = (): void => {
    for (const w of workers) w.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    if (sockPath !== undefined) rmSync(sockPath, { force: true });
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  for (let i = 0; i < n; i++) workers.push(await startWorker(dir, i, get('--php', '/usr/bin/php-cgi')!));
  free.push(...workers);
  const server = createServer(onFront);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (sockPath !== undefined) {
      rmSync(sockPath, { force: true }); // a stale socket from an earlier run
      server.listen({ path: sockPath, backlog: 4096 }, resolve);
    } else {
      const colon = listen.lastIndexOf(':');
      server.listen({ host: listen.slice(0, colon), port: Number(listen.slice(colon + 1)), backlog: 4096 }, resolve);
    }
  });
  process.stdout.write('ready\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`relay-floor: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
