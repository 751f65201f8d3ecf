/**
 * A raw FastCGI client for tests, built on the project's codec (src/protocol/fastcgi.ts):
 * full control over which records go out and in which order, so a test can interleave
 * several request ids on one connection, send GET_VALUES, ABORT_REQUEST, unknown record
 * types or plain garbage, and inspect every record that comes back.
 */
import type { Socket } from 'node:net';
import {
  FcgiDecoder,
  FCGI_KEEP_CONN,
  RecordType,
  Role,
  decodeNameValues,
  encodeBeginRequest,
  encodeNameValues,
  encodeRecord,
  encodeAbortRequest,
  parseEndRequest,
  type FcgiRecord,
} from '../../src/protocol/fastcgi.js';
import { CgiParams } from '../../src/protocol/params.js';
import { connectTo, type ConnectTarget } from './wait.js';

export interface FcgiResponse {
  requestId: number;
  stdout: Buffer;
  stderr: Buffer;
  appStatus: number;
  protocolStatus: number;
}

export interface CgiOutput {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
  /** First value of a header, case-insensitive. */
  header(name: string): string | undefined;
}

/** Splits CGI output (as a FastCGI responder writes it) into status, headers and body. */
export function parseCgiOutput(out: Buffer): CgiOutput {
  let end = out.indexOf('\r\n\r\n');
  let sepLen = 4;
  const lf = out.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) {
    end = lf;
    sepLen = 2;
  }
  if (end < 0) throw new Error(`no end of CGI head in ${JSON.stringify(out.subarray(0, 200).toString('latin1'))}`);
  const headers: Array<[string, string]> = [];
  const lines = out.subarray(0, end).toString('latin1').split(/\r?\n/);
  // SCGI front ends may also answer with an HTTP status line (nginx accepts both).
  const statusLine = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (statusLine) lines.shift();
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i > 0) headers.push([line.slice(0, i).trim(), line.slice(i + 1).trim()]);
  }
  const header = (name: string): string | undefined => headers.find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  const statusText = statusLine ? statusLine[1] : header('status');
  const status = statusText ? Number.parseInt(statusText, 10) : header('location') ? 302 : 200;
  return { status, headers, body: out.subarray(end + sepLen), header };
}

/** PARAMS records for `params` (split into records of at most `maxRecord` bytes) plus the empty one. */
export function paramsRecords(requestId: number, params: Record<string, string> | CgiParams, maxRecord = 65535): Buffer[] {
  const p = params instanceof CgiParams ? params : CgiParams.fromObject(params);
  const body = encodeNameValues(p);
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += maxRecord) out.push(encodeRecord(RecordType.Params, requestId, body.subarray(i, i + maxRecord)));
  out.push(encodeRecord(RecordType.Params, requestId));
  return out;
}

/** STDIN records for `data` in pieces of at most `maxRecord` bytes, plus the empty one. */
export function stdinRecords(requestId: number, data: Buffer, maxRecord = 65535): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += maxRecord) out.push(encodeRecord(RecordType.Stdin, requestId, data.subarray(i, i + maxRecord)));
  out.push(encodeRecord(RecordType.Stdin, requestId));
  return out;
}

/** What a request's BEGIN_REQUEST says: the role (default responder) and FCGI_KEEP_CONN (default set). */
export interface BeginOptions {
  keepConn?: boolean;
  role?: number;
}

/** Every record of one whole request, in order. */
export function requestRecords(
  requestId: number,
  params: Record<string, string> | CgiParams,
  body: Buffer = Buffer.alloc(0),
  opts: BeginOptions & { maxRecord?: number } = {},
): Buffer[] {
  return [
    encodeBeginRequest(requestId, opts.role ?? Role.Responder, opts.keepConn === false ? 0 : FCGI_KEEP_CONN),
    ...paramsRecords(requestId, params, opts.maxRecord),
    ...stdinRecords(requestId, body, opts.maxRecord),
  ];
}

/** Round-robin merge of several record lists: r1[0], r2[0], r3[0], r1[1], ... */
export function interleave(lists: Buffer[][]): Buffer[] {
  const out: Buffer[] = [];
  const max = Math.max(...lists.map((l) => l.length));
  for (let i = 0; i < max; i++) for (const l of lists) if (i < l.length) out.push(l[i]!);
  return out;
}

interface Waiter {
  check: () => boolean;
  resolve: () => void;
}

export class FcgiClient {
  readonly socket: Socket;
  /** Every record received, content copied. */
  readonly records: FcgiRecord[] = [];
  /** Set when the server's bytes could not be decoded. */
  decodeError: Error | undefined;
  closed = false;
  closeError: string | undefined;
  private readonly decoder: FcgiDecoder;
  private waiters: Waiter[] = [];

  private constructor(socket: Socket) {
    this.socket = socket;
    this.decoder = new FcgiDecoder((rec) => {
      this.records.push({ type: rec.type, requestId: rec.requestId, content: Buffer.from(rec.content) });
    });
    socket.on('data', (chunk: Buffer) => {
      if (this.decodeError) return;
      try {
        this.decoder.push(chunk);
      } catch (err) {
        this.decodeError = err as Error;
      }
      this.wake();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      this.closeError = err.code ?? err.message;
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static connect(target: ConnectTarget): Promise<FcgiClient> {
    return new Promise((resolve, reject) => {
      const s = connectTo(target);
      s.once('error', reject);
      s.once('connect', () => {
        s.off('error', reject);
        resolve(new FcgiClient(s));
      });
    });
  }

  send(...bufs: Buffer[]): void {
    for (const b of bufs) this.socket.write(b);
  }

  /** Writes all bufs as one chunk (several records in one TCP segment). */
  sendTogether(bufs: Buffer[]): void {
    this.socket.write(Buffer.concat(bufs));
  }

  /** A whole request: BEGIN, PARAMS, STDIN. */
  request(requestId: number, params: Record<string, string> | CgiParams, body?: Buffer, opts?: BeginOptions): void {
    this.sendTogether(requestRecords(requestId, params, body, opts));
  }

  abort(requestId: number): void {
    this.socket.write(encodeAbortRequest(requestId));
  }

  /** Sends FCGI_GET_VALUES for `names` and resolves with the GET_VALUES_RESULT pairs. */
  async getValues(names: string[], timeout = 5000): Promise<Record<string, string>> {
    const q: Record<string, string> = {};
    for (const n of names) q[n] = '';
    const start = this.records.length;
    this.socket.write(encodeRecord(RecordType.GetValues, 0, encodeNameValues(CgiParams.fromObject(q))));
    const rec = await this.waitRecord((r) => r.type === RecordType.GetValuesResult, timeout, start);
    return decodeNameValues(rec.content, { maxBytes: 65536, maxCount: 1000 }).toObject();
  }

  /** The first record (from index `from`) matching pred. */
  async waitRecord(pred: (r: FcgiRecord) => boolean, timeout = 5000, from = 0): Promise<FcgiRecord> {
    let found: FcgiRecord | undefined;
    await this.waitUntil(() => {
      for (let i = from; i < this.records.length; i++) {
        if (pred(this.records[i]!)) {
          found = this.records[i];
          return true;
        }
      }
      return false;
    }, timeout, 'a matching record');
    return found!;
  }

  /** Resolves once END_REQUEST for `requestId` arrived; collects its STDOUT/STDERR. */
  async response(requestId: number, timeout = 10_000): Promise<FcgiResponse> {
    await this.waitUntil(
      () => this.records.some((r) => r.type === RecordType.EndRequest && r.requestId === requestId),
      timeout,
      `END_REQUEST for request ${requestId}`,
    );
    return this.collect(requestId);
  }

  /** What arrived so far for `requestId`. */
  collect(requestId: number): FcgiResponse {
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let appStatus = -1;
    let protocolStatus = -1;
    for (const r of this.records) {
      if (r.requestId !== requestId) continue;
      if (r.type === RecordType.Stdout) stdout.push(r.content);
      else if (r.type === RecordType.Stderr) stderr.push(r.content);
      else if (r.type === RecordType.EndRequest) ({ appStatus, protocolStatus } = parseEndRequest(r.content));
    }
    return { requestId, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr), appStatus, protocolStatus };
  }

  /** Resolves when the server closed the connection (true) or timeout passed (false). */
  async waitClose(timeout = 5000): Promise<boolean> {
    try {
      await this.waitUntil(() => this.closed, timeout, 'close');
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.check()) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }

  private waitUntil(check: () => boolean, timeout: number, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        check: () => check() || this.closed || this.decodeError !== undefined,
        resolve: () => {
          clearTimeout(timer);
          if (check()) resolve();
          else if (this.decodeError) reject(new Error(`waiting for ${what}: undecodable reply: ${this.decodeError.message}`));
          else reject(new Error(`waiting for ${what}: connection closed${this.closeError ? ` (${this.closeError})` : ''}; got ${this.describe()}`));
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`timed out after ${timeout} ms waiting for ${what}; got ${this.describe()}`));
      }, timeout);
      this.waiters.push(w);
    });
  }

  /** Short summary of the records received, for failure messages. */
  describe(): string {
    const names: Record<number, string> = Object.fromEntries(Object.entries(RecordType).map(([k, v]) => [v, k]));
    const parts = this.records.slice(-20).map((r) => `${names[r.type] ?? r.type}#${r.requestId}(${r.content.length})`);
    return `[${parts.join(' ')}]${this.closed ? ' closed' : ''}`;
  }
}

/** Standard CGI params for a php page served from `docRoot`. */
export function phpParams(docRoot: string, script: string, extra: Record<string, string> = {}): Record<string, string> {
  const [path, query = ''] = script.split('?') as [string, string?];
  return {
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
    SERVER_SOFTWARE: 'fcgi-pm-test',
    SERVER_NAME: 'localhost',
    SERVER_PORT: '80',
    REMOTE_ADDR: '127.0.0.1',
    REQUEST_METHOD: 'GET',
    SCRIPT_NAME: path,
    SCRIPT_FILENAME: docRoot + path,
    DOCUMENT_ROOT: docRoot,
    REQUEST_URI: script,
    QUERY_STRING: query,
    REDIRECT_STATUS: '200',
    CONTENT_LENGTH: '',
    CONTENT_TYPE: '',
    ...extra,
  };
}
