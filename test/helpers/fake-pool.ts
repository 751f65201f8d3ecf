/**
 * A Pool whose dispatch is answered by test code, so front-end tests exercise the
 * listeners without any backend: echo the params, stream the request body back with
 * back-pressure both ways, delay, fail with a ProxyError, or never answer.
 */
import { ProxyError, ErrorCodes } from '../../src/errors.js';
import type { CgiResponseHead, Exchange } from '../../src/protocol/exchange.js';
import { zeroCounters } from '../../src/pool/counters.js';
import type { Pool, PoolSnapshot } from '../../src/pool/types.js';

export type Behaviour = (ex: Exchange, pool: FakePool) => void;

/** A CGI response head as a backend would send it. */
export function makeHead(status: number, headers: Array<[string, string]> = [], reason?: string): CgiResponseHead {
  const why = reason ?? (status === 200 ? 'OK' : 'Status');
  let raw = `Status: ${status} ${why}\r\n`;
  for (const [k, v] of headers) raw += `${k}: ${v}\r\n`;
  raw += '\r\n';
  return { status, reason: why, headers, raw: Buffer.from(raw, 'latin1') };
}

export class FakePool implements Pool {
  readonly name: string;
  behaviour: Behaviour;
  readonly dispatched: Exchange[] = [];
  readonly aborted: Exchange[] = [];
  /** Times the response side saw respondBody() return false (client back-pressure). */
  responsePauses = 0;
  /** Times the body consumer asked the exchange to pause (request back-pressure). */
  bodyPauses = 0;
  private waiters: Array<{ n: number; resolve: (ex: Exchange) => void }> = [];
  private abortWaiters = new Map<Exchange, Array<() => void>>();

  constructor(behaviour: Behaviour = echoParams, name = 'test') {
    this.name = name;
    this.behaviour = behaviour;
  }

  dispatch(ex: Exchange): void {
    this.dispatched.push(ex);
    ex.onAbort = () => {
      this.aborted.push(ex);
      for (const w of this.abortWaiters.get(ex) ?? []) w();
      this.abortWaiters.delete(ex);
    };
    for (const w of this.waiters.filter((x) => x.n === this.dispatched.length)) w.resolve(ex);
    this.waiters = this.waiters.filter((x) => x.n !== this.dispatched.length);
    this.behaviour(ex, this);
  }

  /** Resolves with the n-th exchange dispatched (1-based) once it arrives. */
  nth(n: number): Promise<Exchange> {
    if (this.dispatched.length >= n) return Promise.resolve(this.dispatched[n - 1]!);
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  /** Resolves when the exchange's onAbort (as set by this pool) fired. */
  abortedP(ex: Exchange): Promise<void> {
    if (this.aborted.includes(ex)) return Promise.resolve();
    return new Promise((resolve) => {
      const l = this.abortWaiters.get(ex) ?? [];
      l.push(resolve);
      this.abortWaiters.set(ex, l);
    });
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}

  snapshot(): PoolSnapshot {
    return {
      ...zeroCounters(),
      accepted: this.dispatched.length,
      name: this.name,
      kind: 'external',
      pm: undefined,
      queued: 0,
      queueLimit: 0,
      active: 0,
      workers: [],
      backends: [],
    };
  }
}

/** Answers 200 with the params as a JSON object, after reading (and dropping) the body. */
export const echoParams: Behaviour = (ex) => {
  readBody(ex, () => {
    const body = Buffer.from(JSON.stringify(ex.params.toObject()));
    ex.respondHead(makeHead(200, [['Content-Type', 'application/json'], ['Content-Length', String(body.length)]]));
    ex.respondBody(body);
    ex.respondEnd();
  });
};

/** Streams the request body back as the response body as it arrives, honouring back-pressure both ways. */
export const echoBody: Behaviour = (ex, pool) => {
  ex.respondHead(makeHead(200, [['Content-Type', 'application/octet-stream']]));
  ex.onResponseDrain = () => ex.bodyConsumerDrained();
  ex.consumeBody({
    data(chunk) {
      if (ex.respondBody(chunk)) return true;
      pool.responsePauses++;
      pool.bodyPauses++;
      return false;
    },
    end() {
      ex.respondEnd();
    },
  });
};

/**
 * Reads the whole body, then sends it back (with back-pressure). nginx stops sending a
 * request body once the response head arrived, so behind nginx a backend must read
 * first, as php-cgi does.
 */
export const echoBodyAfterEnd: Behaviour = (ex, pool) => {
  readBody(ex, (body) => sendPaced(ex, pool, body, 65536));
};

function sendPaced(ex: Exchange, pool: FakePool, data: Buffer, piece: number): void {
  ex.respondHead(makeHead(200, [['Content-Length', String(data.length)]]));
  let off = 0;
  const pump = (): void => {
    while (off < data.length && !ex.finished) {
      const chunk = data.subarray(off, off + piece);
      off += chunk.length;
      if (!ex.respondBody(chunk)) {
        pool.responsePauses++;
        ex.onResponseDrain = () => {
          ex.onResponseDrain = undefined;
          pump();
        };
        return;
      }
    }
    if (!ex.finished) ex.respondEnd();
  };
  pump();
}

/** Sends `total` bytes of `block` repeated, waiting for drain whenever the client is slow. */
export function streamBytes(block: Buffer, total: number, headers: Array<[string, string]> = []): Behaviour {
  return (ex, pool) => {
    readBody(ex, () => {
      ex.respondHead(makeHead(200, headers));
      let sent = 0;
      const pump = (): void => {
        while (sent < total && !ex.finished) {
          const n = Math.min(block.length, total - sent);
          sent += n;
          if (!ex.respondBody(n === block.length ? block : block.subarray(0, n))) {
            pool.responsePauses++;
            ex.onResponseDrain = () => {
              ex.onResponseDrain = undefined;
              pump();
            };
            return;
          }
        }
        if (!ex.finished) ex.respondEnd();
      };
      pump();
    });
  };
}

/** Answers with a fixed head and body (body may be empty; end right away). */
export function respond(status: number, headers: Array<[string, string]> = [], body: Buffer | string = '', reason?: string): Behaviour {
  return (ex) => {
    readBody(ex, () => {
      ex.respondHead(makeHead(status, headers, reason));
      if (body.length > 0) ex.respondBody(Buffer.from(body));
      ex.respondEnd();
    });
  };
}

/** Fails before any response byte. */
export function failWith(err: ProxyError): Behaviour {
  return (ex) => ex.respondError(err);
}

export const unavailable = (): Behaviour => failWith(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'queue full', 7));

/** Sends the head and part of the body, then fails (a backend that died mid-response). */
export const failAfterHead: Behaviour = (ex) => {
  ex.respondHead(makeHead(200, [['Content-Type', 'text/plain']]));
  ex.respondBody(Buffer.from('partial'));
  setImmediate(() => ex.respondError(new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, 'backend closed mid-response')));
};

/** Never answers (until aborted). */
export const never: Behaviour = () => {};

/** Runs `inner` after `ms`. */
export function delayed(ms: number, inner: Behaviour): Behaviour {
  return (ex, pool) => {
    const t = setTimeout(() => {
      if (!ex.finished) inner(ex, pool);
    }, ms);
    const prev = ex.onAbort;
    ex.onAbort = () => {
      clearTimeout(t);
      prev?.();
    };
  };
}

/** Consumes the whole request body, then calls done (with the bytes, if the caller wants them). */
export function readBody(ex: Exchange, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  ex.consumeBody({
    data(chunk) {
      chunks.push(chunk);
      return true;
    },
    end() {
      done(Buffer.concat(chunks));
    },
  });
}
