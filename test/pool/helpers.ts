/**
 * Pool test helpers: a recording ResponseSink, exchanges made directly, a fake
 * Endpoint whose requests the test finishes by hand, and a default PoolConfig.
 */
import type { PoolConfig } from '../../src/config/types.js';
import type { ProxyError } from '../../src/errors.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import { Exchange, type CgiResponseHead, type ResponseSink } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';
import type { Endpoint, UpstreamOptions, UpstreamOutcome } from '../../src/upstream/types.js';

export class RecordingSink implements ResponseSink {
  status = 0;
  headers: Array<[string, string]> = [];
  chunks: Buffer[] = [];
  stderrText = '';
  error: ProxyError | undefined;
  ended = false;
  /** performance.now() when the exchange was answered (end or fail). */
  answeredAt = 0;
  readonly answered: Promise<void>;
  private resolve!: () => void;

  constructor() {
    this.answered = new Promise((r) => (this.resolve = r));
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  get done(): boolean {
    return this.answeredAt !== 0;
  }

  head(head: CgiResponseHead): void {
    this.status = head.status;
    this.headers = head.headers;
  }
  body(chunk: Buffer): boolean {
    this.chunks.push(Buffer.from(chunk));
    return true;
  }
  stderr(chunk: Buffer): void {
    this.stderrText += chunk.toString('utf8');
  }
  end(): void {
    this.ended = true;
    this.answeredAt = performance.now();
    this.resolve();
  }
  fail(err: ProxyError): number {
    this.error = err;
    if (this.status === 0) this.status = err.status;
    this.answeredAt = performance.now();
    this.resolve();
    return 0;
  }
}

export interface TestRequest {
  ex: Exchange;
  sink: RecordingSink;
}

/** An exchange with the given params and an empty body, as a front end would make it. */
export function makeRequest(params: Record<string, string> = {}, body?: Buffer): TestRequest {
  const sink = new RecordingSink();
  const ex = new Exchange(
    CgiParams.fromObject({ REQUEST_METHOD: body ? 'POST' : 'GET', CONTENT_LENGTH: String(body?.length ?? 0), ...params }),
    sink,
    'test',
    performance.now(),
  );
  if (body) ex.pushBody(body);
  ex.endBody();
  return { ex, sink };
}

export function addr(text: string): SocketAddress {
  const a = parseAddress(text);
  if (typeof a === 'string') throw new Error(a);
  return a;
}

/** A fake Endpoint: run() records the request; the test answers it with finish(). */
export class FakeEndpoint implements Endpoint {
  readonly address: SocketAddress;
  readonly opts: UpstreamOptions;
  running: Array<{ ex: Exchange; done: (o: UpstreamOutcome) => void }> = [];
  runs = 0;
  destroyed = false;
  idleClosed = 0;
  /** Answer each run() at once with this, instead of keeping it running. */
  auto: ((ex: Exchange) => UpstreamOutcome) | undefined;

  constructor(address: SocketAddress, opts: UpstreamOptions) {
    this.address = address;
    this.opts = opts;
  }

  get active(): number {
    return this.running.length;
  }

  run(ex: Exchange, done: (o: UpstreamOutcome) => void): void {
    this.runs++;
    if (this.auto) {
      const o = this.auto(ex);
      if (o.kind === 'done') respondOk(ex, this.address.text);
      done(o);
      return;
    }
    this.running.push({ ex, done });
  }

  /** Ends the oldest running request (or the given one) with a 200 response, or with `outcome`. */
  finish(outcome?: UpstreamOutcome, which = 0): Exchange {
    const r = this.running.splice(which, 1)[0];
    if (!r) throw new Error(`${this.address.text}: nothing running`);
    if (!outcome || outcome.kind === 'done') respondOk(r.ex, this.address.text);
    r.done(outcome ?? { kind: 'done' });
    return r.ex;
  }

  closeIdle(): void {
    this.idleClosed++;
  }

  destroy(): void {
    this.destroyed = true;
  }
}

export function respondOk(ex: Exchange, text: string): void {
  ex.respondHead({ status: 200, reason: 'OK', headers: [['Content-Type', 'text/plain']], raw: Buffer.alloc(0) });
  ex.respondBody(Buffer.from(text));
  ex.respondEnd();
}

export function poolConfig(over: Partial<PoolConfig> = {}): PoolConfig {
  return {
    name: 'test',
    backend: 'fastcgi',
    backends: [],
    maxConnsPerBackend: 16,
    backendDownTime: 5000,
    connectTimeout: 5000,
    readTimeout: 60_000,
    keepAlive: true,
    command: undefined,
    socket: 'fd0',
    env: {},
    inheritEnv: [],
    cwd: undefined,
    user: undefined,
    group: undefined,
    pm: 'ondemand',
    maxChildren: 5,
    startChildren: 1,
    minSpare: 1,
    maxSpare: 3,
    maxSpawnRate: 32,
    spawnTimeout: 10_000,
    idleTimeout: 10_000,
    maxRequests: 0,
    maxRequestsJitter: 0,
    maxLifetime: 0,
    requestTimeout: 0,
    slowRequest: 0,
    killTimeout: 5000,
    crashLimit: 5,
    crashWindow: 60_000,
    queueLimit: 1024,
    queueTimeout: 30_000,
    ...over,
  };
}

import type { Logger } from '../../src/log/log.js';
import { lineLogger } from '../helpers/log.js';

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** A logger that keeps every line (parsed) for assertions. Levels: 30 info, 40 warn, 50 error. */
export function recordingLogger(level = 'debug'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = lineLogger(level, (s) => void lines.push(JSON.parse(s) as LogLine));
  return { logger, lines };
}
