/**
 * Exchange: body buffering, back-pressure both ways, rewind, abort and finish, with
 * recording fakes for the front end's sink and the upstream's body consumer (the
 * Exchange is pure, so nothing real is left out).
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import {
  BODY_PENDING_HIGH_WATER,
  BODY_REPLAY_LIMIT,
  Exchange,
  type BodyConsumer,
  type CgiResponseHead,
  type ResponseSink,
} from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';

class Sink implements ResponseSink {
  events: string[] = [];
  bodies: Buffer[] = [];
  /** What body() answers. */
  ready = true;
  head(h: CgiResponseHead): void {
    this.events.push(`head ${h.status}`);
  }
  body(chunk: Buffer): boolean {
    this.events.push('body');
    this.bodies.push(chunk);
    return this.ready;
  }
  stderr(chunk: Buffer): void {
    this.events.push(`stderr ${chunk}`);
  }
  end(): void {
    this.events.push('end');
  }
  fail(err: ProxyError): number {
    this.events.push(`fail ${err.status}`);
    return 0;
  }
}

class Consumer implements BodyConsumer {
  chunks: Buffer[] = [];
  ended = 0;
  /** Answers for successive data() calls; true once they run out. */
  answers: boolean[] = [];
  onData: ((chunk: Buffer) => void) | undefined;
  data(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    this.onData?.(chunk);
    return this.answers.length > 0 ? this.answers.shift()! : true;
  }
  end(): void {
    this.ended++;
  }
  get text(): string {
    return Buffer.concat(this.chunks).toString();
  }
}

const HEAD: CgiResponseHead = { status: 200, reason: 'OK', headers: [], raw: Buffer.from('\r\n') };

function make(): { ex: Exchange; sink: Sink; finishes: Exchange[]; drains: { body: number; response: number } } {
  const sink = new Sink();
  const ex = new Exchange(new CgiParams(['REQUEST_METHOD', 'POST']), sink, 'fastcgi', 0);
  const finishes: Exchange[] = [];
  const drains = { body: 0, response: 0 };
  ex.onFinish = (e) => finishes.push(e);
  ex.onBodyDrain = () => drains.body++;
  ex.onResponseDrain = () => drains.response++;
  return { ex, sink, finishes, drains };
}

const chunk = (n: number, fill = 0x61) => Buffer.alloc(n, fill);

describe('request body', () => {
  test('buffered before a consumer attaches, delivered in order without copies, then end', () => {
    const { ex } = make();
    const a = Buffer.from('one ');
    const b = Buffer.from('two');
    assert.equal(ex.pushBody(a), true);
    assert.equal(ex.pushBody(b), true);
    ex.endBody();
    assert.equal(ex.bodyComplete, true);
    const c = new Consumer();
    ex.consumeBody(c);
    assert.equal(c.chunks[0], a);
    assert.equal(c.chunks[1], b);
    assert.equal(c.ended, 1);
  });

  test('the front end is asked to pause once the queued body reaches the high-water mark', () => {
    const { ex, drains } = make();
    const half = BODY_PENDING_HIGH_WATER / 2;
    assert.equal(ex.pushBody(chunk(half)), true);
    assert.equal(ex.pushBody(chunk(half - 1)), true);
    assert.equal(ex.pushBody(chunk(1)), false, 'at the high-water mark');
    assert.equal(drains.body, 0);
    const c = new Consumer();
    ex.consumeBody(c);
    assert.equal(c.chunks.length, 3);
    assert.equal(drains.body, 1, 'resumed once the consumer took it');
  });

  test('an empty chunk is ignored', () => {
    const { ex } = make();
    const c = new Consumer();
    ex.consumeBody(c);
    assert.equal(ex.pushBody(Buffer.alloc(0)), true);
    assert.equal(c.chunks.length, 0);
  });

  test('consumer back-pressure pauses the front end until the consumer drains', () => {
    const { ex, drains } = make();
    const c = new Consumer();
    ex.consumeBody(c);
    assert.equal(ex.pushBody(Buffer.from('a')), true);
    c.answers.push(false);
    assert.equal(ex.pushBody(Buffer.from('b')), false, 'consumer said stop');
    assert.equal(ex.pushBody(Buffer.from('c')), false, 'still paused');
    assert.equal(c.text, 'ab', 'nothing delivered while paused');
    ex.endBody();
    assert.equal(c.ended, 0);
    assert.equal(drains.body, 0);
    ex.bodyConsumerDrained();
    assert.equal(c.text, 'abc');
    assert.equal(c.ended, 1);
    assert.equal(drains.body, 1);
  });

  test('draining one chunk at a time when the consumer keeps pushing back', () => {
    const { ex, drains } = make();
    const c = new Consumer();
    c.answers.push(false);
    ex.consumeBody(c);
    assert.equal(ex.pushBody(Buffer.from('1')), false);
    ex.pushBody(Buffer.from('2'));
    ex.pushBody(Buffer.from('3'));
    c.answers.push(false);
    ex.bodyConsumerDrained();
    assert.equal(c.text, '12');
    assert.equal(drains.body, 0, 'not resumed while the consumer is still paused');
    ex.bodyConsumerDrained();
    assert.equal(c.text, '123');
    assert.equal(drains.body, 1);
    assert.equal(ex.pushBody(Buffer.from('4')), true);
  });

  test('onBodyDrain is not called when the front end was never paused', () => {
    const { ex, drains } = make();
    const c = new Consumer();
    ex.consumeBody(c);
    ex.pushBody(Buffer.from('x'));
    ex.bodyConsumerDrained();
    ex.endBody();
    assert.equal(drains.body, 0);
  });

  test('end comes only after all data, and only once', () => {
    const { ex } = make();
    const c = new Consumer();
    ex.consumeBody(c);
    ex.endBody();
    ex.endBody();
    assert.equal(c.ended, 1);
    assert.equal(ex.pushBody(Buffer.from('late')), true);
    assert.equal(c.chunks.length, 0, 'body bytes after endBody are dropped');
  });

  test('regression: a response head before the body was consumed keeps the undelivered body', () => {
    // A backend may answer (e.g. 413) before reading all of stdin; the rest must still reach it.
    const { ex } = make();
    const c = new Consumer();
    c.answers.push(false);
    ex.consumeBody(c);
    ex.pushBody(Buffer.from('first'));
    ex.pushBody(Buffer.from('second'));
    ex.endBody();
    ex.respondHead(HEAD);
    ex.bodyConsumerDrained();
    assert.equal(c.text, 'firstsecond');
    assert.equal(c.ended, 1);
    assert.equal(ex.rewind(), false, 'no replay once the response started');
  });
});

describe('response', () => {
  test('head, body with back-pressure, stderr, end', () => {
    const { ex, sink, finishes, drains } = make();
    assert.equal(ex.responseStarted, false);
    ex.respondHead({ ...HEAD, status: 404 });
    assert.equal(ex.responseStarted, true);
    assert.equal(ex.status, 404);
    assert.equal(ex.respondBody(Buffer.from('12345')), true);
    sink.ready = false;
    assert.equal(ex.respondBody(Buffer.from('678')), false, 'client slow');
    ex.responseDrained();
    assert.equal(drains.response, 1);
    ex.respondStderr(Buffer.from('warn'));
    ex.respondEnd();
    assert.deepEqual(sink.events, ['head 404', 'body', 'body', 'stderr warn', 'end']);
    assert.equal(ex.bytesOut, 8);
    assert.equal(ex.state, 'done');
    assert.deepEqual(finishes, [ex]);
  });

  test('respondError before the head answers with the error status', () => {
    const { ex, sink, finishes } = make();
    const err = new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'queue full', 5);
    ex.respondError(err);
    assert.equal(ex.status, 503);
    assert.equal(ex.error, err);
    assert.equal(ex.state, 'failed');
    assert.deepEqual(sink.events, ['fail 503']);
    assert.equal(finishes.length, 1);
  });

  test('respondError after the head keeps the head status for the log', () => {
    const { ex, sink } = make();
    ex.respondHead(HEAD);
    ex.respondError(new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, 'cut'));
    assert.equal(ex.status, 200);
    assert.deepEqual(sink.events, ['head 200', 'fail 502']);
  });

  test('onFinish exactly once, whatever ends the exchange and whatever follows', () => {
    const enders: Array<(ex: Exchange) => void> = [
      (ex) => ex.respondEnd(),
      (ex) => ex.respondError(new ProxyError(ErrorCodes.BACKEND_TIMEOUT, 504, 't')),
      (ex) => ex.abort(),
    ];
    for (const first of enders) {
      for (const second of enders) {
        const { ex, sink, finishes } = make();
        ex.respondHead(HEAD);
        first(ex);
        const state = ex.state;
        const events = sink.events.length;
        second(ex);
        ex.respondBody(Buffer.from('late'));
        ex.respondStderr(Buffer.from('late'));
        ex.respondHead(HEAD);
        assert.equal(finishes.length, 1);
        assert.equal(ex.state, state, 'the first ending sticks');
        assert.equal(sink.events.length, events, 'nothing reaches the sink after the end');
        assert.equal(ex.finished, true);
      }
    }
  });
});

describe('abort', () => {
  test('calls onAbort once, then onFinish once, and stops the body', () => {
    const { ex, finishes } = make();
    let aborts = 0;
    ex.onAbort = () => {
      aborts++;
      assert.equal(ex.state, 'aborted', 'state is set before the holder hears of it');
    };
    const c = new Consumer();
    c.answers.push(false);
    ex.consumeBody(c);
    ex.pushBody(Buffer.from('a'));
    ex.pushBody(Buffer.from('b'));
    ex.abort();
    ex.abort();
    assert.equal(aborts, 1);
    assert.equal(finishes.length, 1);
    assert.equal(finishes[0]!.state, 'aborted');
    ex.endBody();
    ex.bodyConsumerDrained();
    assert.equal(c.text, 'a', 'nothing more delivered');
    assert.equal(c.ended, 0, 'no end after an abort');
    assert.equal(ex.pushBody(Buffer.from('c')), true);
  });

  test('after the whole announced body went to the sink, a client close is no abort: done, the holder not told', () => {
    const { ex, finishes } = make();
    let aborts = 0;
    ex.onAbort = () => aborts++;
    ex.endBody();
    ex.respondHead({ ...HEAD, headers: [['content-length', '5']] });
    ex.respondBody(Buffer.from('hel'));
    assert.equal(ex.bodyDue, 2);
    ex.respondBody(Buffer.from('lo'));
    assert.equal(ex.bodyDue, 0);
    ex.abort();
    assert.equal(ex.state, 'done');
    assert.equal(aborts, 0, 'the backend ends the request as usual');
    assert.deepEqual(finishes.map((e) => e.state), ['done']);
    ex.respondEnd();
    assert.equal(finishes.length, 1);
  });

  for (const [what, head, method, state] of [
    ['part of the announced body', { ...HEAD, headers: [['Content-Length', '6']] }, 'GET', 'aborted'],
    ['no Content-Length', HEAD, 'GET', 'aborted'],
    ['a Content-Length that is not a number', { ...HEAD, headers: [['Content-Length', '5, 5']] }, 'GET', 'aborted'],
    ['a HEAD request (no body whatever the length says)', { ...HEAD, headers: [['Content-Length', '900']] }, 'HEAD', 'done'],
    ['a 304 (no body)', { ...HEAD, status: 304, headers: [['Content-Length', '900']] }, 'GET', 'done'],
  ] as const) {
    test(`a client close after ${what}: ${state}`, () => {
      const sink = new Sink();
      const ex = new Exchange(new CgiParams(['REQUEST_METHOD', method]), sink, 'scgi', 0);
      let aborts = 0;
      ex.onAbort = () => aborts++;
      ex.endBody();
      ex.respondHead(head as CgiResponseHead);
      if (method === 'GET' && head.status === 200) ex.respondBody(Buffer.from('hello'));
      ex.abort();
      assert.equal(ex.state, state);
      assert.equal(aborts, state === 'aborted' ? 1 : 0);
    });
  }

  test('failByClient: the holder hears of it as an abort, the client gets the error, the log its status', () => {
    const { ex, sink, finishes } = make();
    let aborts = 0;
    ex.onAbort = () => {
      aborts++;
      assert.ok(ex.finished, 'finished before the holder hears of it, so it cannot answer too');
    };
    const c = new Consumer();
    ex.consumeBody(c);
    ex.pushBody(Buffer.from('a'));
    ex.failByClient(new ProxyError(ErrorCodes.CLIENT_BODY_TIMEOUT, 408, 'stalled'));
    ex.respondError(new ProxyError(ErrorCodes.BACKEND_CLOSED, 502, 'late'));
    ex.failByClient(new ProxyError(ErrorCodes.CLIENT_BODY_TIMEOUT, 408, 'again'));
    assert.equal(aborts, 1);
    assert.deepEqual(sink.events, ['fail 408']);
    assert.equal(finishes.length, 1);
    assert.equal(ex.status, 408);
    assert.equal(ex.error?.code, ErrorCodes.CLIENT_BODY_TIMEOUT);
    ex.pushBody(Buffer.from('b'));
    ex.endBody();
    assert.equal(c.text, 'a');
    assert.equal(c.ended, 0);
  });

  test('regression: no end() to the consumer when the body ends after an abort', () => {
    const { ex } = make();
    const c = new Consumer();
    ex.consumeBody(c);
    ex.abort();
    ex.endBody();
    assert.equal(c.ended, 0);
    const late = new Consumer();
    ex.consumeBody(late);
    assert.equal(late.ended, 0, 'a consumer attached after the end hears nothing');
  });

  test('a consumer that aborts the exchange from data() gets nothing more', () => {
    const { ex } = make();
    ex.pushBody(Buffer.from('1'));
    ex.pushBody(Buffer.from('2'));
    ex.endBody();
    const c = new Consumer();
    c.onData = () => ex.abort();
    ex.consumeBody(c);
    assert.equal(c.text, '1');
    assert.equal(c.ended, 0);
  });
});

describe('rewind', () => {
  test('a body within BODY_REPLAY_LIMIT is replayed in full to the next consumer', () => {
    const { ex } = make();
    const parts = [chunk(20000, 0x61), chunk(20000, 0x62), chunk(BODY_REPLAY_LIMIT - 40000, 0x63)];
    for (const p of parts) ex.pushBody(p);
    ex.endBody();
    const a = new Consumer();
    ex.consumeBody(a);
    assert.equal(a.ended, 1);
    assert.equal(ex.rewind(), true);
    const b = new Consumer();
    ex.consumeBody(b);
    assert.deepEqual(b.chunks, parts);
    assert.equal(b.ended, 1);
    assert.equal(a.chunks.length, 3, 'the first consumer gets nothing more');
  });

  test('rewind in the middle of the body: the next consumer gets all of it', () => {
    const { ex } = make();
    const a = new Consumer();
    ex.consumeBody(a);
    ex.pushBody(Buffer.from('ab'));
    a.answers.push(false);
    ex.pushBody(Buffer.from('cd'));
    ex.pushBody(Buffer.from('ef')); // queued: a is paused
    assert.equal(ex.rewind(), true);
    ex.pushBody(Buffer.from('gh'));
    ex.endBody();
    const b = new Consumer();
    ex.consumeBody(b);
    assert.equal(b.text, 'abcdefgh');
    assert.equal(b.ended, 1);
    assert.equal(a.text, 'abcd');
    ex.bodyConsumerDrained(); // a late drain from the old connection changes nothing
    assert.equal(a.text, 'abcd');
  });

  test('refused once more than BODY_REPLAY_LIMIT bytes went to a consumer', () => {
    const { ex } = make();
    const a = new Consumer();
    ex.consumeBody(a);
    ex.pushBody(chunk(BODY_REPLAY_LIMIT));
    assert.equal(ex.rewind(), true, 'exactly the limit is still kept');
    const b = new Consumer();
    ex.consumeBody(b);
    assert.equal(b.chunks.length, 1);
    ex.pushBody(chunk(1));
    assert.equal(b.chunks.length, 2, 'delivered even though it cannot be kept');
    assert.equal(ex.rewind(), false);
  });

  test('a body queued beyond the limit but not yet delivered is still replayable', () => {
    const { ex } = make();
    const a = new Consumer();
    a.answers.push(false);
    ex.consumeBody(a);
    ex.pushBody(chunk(1000));
    ex.pushBody(chunk(BODY_REPLAY_LIMIT));
    assert.equal(ex.rewind(), true);
  });

  test('refused after the response started or the exchange ended', () => {
    const { ex } = make();
    ex.pushBody(Buffer.from('x'));
    ex.consumeBody(new Consumer());
    ex.respondHead(HEAD);
    assert.equal(ex.rewind(), false);
    const other = make();
    other.ex.abort();
    assert.equal(other.ex.rewind(), false);
  });

  test('a consumer that rewinds from inside data() gets no more chunks', () => {
    const { ex } = make();
    for (const s of ['1', '2', '3']) ex.pushBody(Buffer.from(s));
    ex.endBody();
    const a = new Consumer();
    a.onData = () => {
      if (a.chunks.length === 2) assert.equal(ex.rewind(), true);
    };
    ex.consumeBody(a);
    assert.equal(a.text, '12', 'delivery stops at the rewind');
    assert.equal(a.ended, 0);
    const b = new Consumer();
    ex.consumeBody(b);
    assert.equal(b.text, '123');
    assert.equal(b.ended, 1);
  });
});

test('exchange ids are unique and increasing; fields start empty', () => {
  const a = make().ex;
  const b = make().ex;
  assert.ok(b.id > a.id);
  assert.equal(a.state, 'pending');
  assert.equal(a.frontend, 'fastcgi');
  assert.equal(a.params.get('REQUEST_METHOD'), 'POST');
  assert.equal(a.status, 0);
});

describe('body delivery cost', () => {
  /** Replaces the exchange's private chunk array with one that counts element writes (pushes and moves). */
  function countWrites(ex: Exchange): { writes: number } {
    const n = { writes: 0 };
    const target: Buffer[] = [];
    (ex as unknown as { chunks: Buffer[] }).chunks = new Proxy(target, {
      set(t, key, value) {
        if (key !== 'length') n.writes++;
        return Reflect.set(t, key, value);
      },
    });
    return n;
  }

  test('once replay is off, each chunk is written into the buffer a bounded number of times (no shift per chunk)', () => {
    const N = 2000;
    const body = Buffer.alloc(N, 'b');
    // Chunks delivered one at a time after the head turned replay off.
    {
      const { ex } = make();
      const n = countWrites(ex);
      for (let i = 0; i < N; i++) ex.pushBody(body.subarray(i, i + 1));
      ex.endBody();
      ex.respondHead({ status: 200, reason: 'OK', headers: [], raw: Buffer.alloc(0) });
      const c = new Consumer();
      ex.consumeBody(c);
      assert.equal(c.text, body.toString());
      assert.equal(c.ended, 1);
      assert.ok(n.writes <= 4 * N, `${n.writes} element writes for ${N} chunks`);
    }
    // Chunks past BODY_REPLAY_LIMIT, the consumer pausing after every chunk.
    {
      const { ex } = make();
      const n = countWrites(ex);
      const big = Buffer.alloc(BODY_REPLAY_LIMIT + N, 'x');
      ex.pushBody(big.subarray(0, BODY_REPLAY_LIMIT));
      for (let i = 0; i < N; i++) ex.pushBody(big.subarray(BODY_REPLAY_LIMIT + i, BODY_REPLAY_LIMIT + i + 1));
      ex.endBody();
      const c = new Consumer();
      let got = 0;
      c.answers = [];
      c.onData = () => {
        got++;
        c.answers.push(false);
      };
      ex.consumeBody(c);
      for (let i = 0; i < N + 5 && c.ended === 0; i++) ex.bodyConsumerDrained();
      assert.equal(got, N + 1);
      assert.equal(Buffer.concat(c.chunks).length, big.length);
      assert.equal(c.ended, 1);
      assert.ok(n.writes <= 4 * N, `${n.writes} element writes for ${N} chunks`);
    }
  });
});
