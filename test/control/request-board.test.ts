/**
 * The status board: what it keeps of a finished request is the request's variables and
 * times, so a finished exchange (and, through its sink, the front-end session and its
 * socket) can be collected while the board still shows the worker's last request.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { RequestBoard, requestStatus } from '../../src/control/request-board.js';
import { Exchange, type ResponseSink } from '../../src/protocol/exchange.js';
import { CgiParams } from '../../src/protocol/params.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A sink standing in for a session: it holds something big, as a socket with its buffers would. */
function sink(): ResponseSink & { ballast: Uint8Array } {
  return { ballast: new Uint8Array(1 << 20), head() {}, body: () => true, stderr() {}, end() {}, fail: () => 0 };
}

function finishOn(board: RequestBoard, pid: number, uri: string, startedAt: number, endedAt: number): WeakRef<Exchange> {
  const ex = new Exchange(CgiParams.fromObject({ REQUEST_METHOD: 'GET', REQUEST_URI: uri, SCRIPT_FILENAME: '/srv/x.php' }), sink(), 'fastcgi', startedAt);
  board.add(ex);
  ex.workerPid = pid;
  ex.onFinish = (e) => board.finished(e, endedAt);
  ex.endBody();
  ex.respondEnd();
  return new WeakRef(ex);
}

test('a finished exchange is not kept by the board, its request still shows', async () => {
  const board = new RequestBoard();
  const ref = finishOn(board, 4242, '/first', 1000, 1250);
  assert.equal(board.inFlight, 0);
  for (let i = 0; i < 3 && ref.deref() !== undefined; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
  assert.equal(ref.deref(), undefined, 'the finished exchange was collected');
  const last = board.lastOf(4242)!;
  const st = requestStatus(last, 2000, 1_000_000, last.endedAt);
  assert.equal(st.method, 'GET');
  assert.equal(st.uri, '/first');
  assert.equal(st.script, '/srv/x.php');
  assert.equal(st.durationMs, 250);
});

test('one record per worker, rewritten by its next request', () => {
  const board = new RequestBoard();
  finishOn(board, 7, '/a', 10, 20);
  const rec = board.lastOf(7);
  finishOn(board, 7, '/b', 30, 45);
  assert.equal(board.lastOf(7), rec, 'the same record, updated in place');
  assert.equal(rec!.params.get('REQUEST_URI'), '/b');
  assert.equal(rec!.endedAt - rec!.startedAt, 15);
  board.prune(new Set());
  assert.equal(board.lastOf(7), undefined);
});

test('past 4096 workers remembered, a new one pushes out the one that finished longest ago', () => {
  const board = new RequestBoard();
  // Worker 1 finished first but ran again last; worker 2 is then the longest finished.
  finishOn(board, 1, '/one', 0, 1);
  for (let pid = 2; pid <= 4096; pid++) finishOn(board, pid, '/x', pid, pid + 1);
  finishOn(board, 1, '/one-again', 10_000, 10_001);
  finishOn(board, 5000, '/new', 10_002, 10_003);
  assert.equal(board.lastOf(2), undefined, 'the longest finished is forgotten');
  assert.equal(board.lastOf(1)?.params.get('REQUEST_URI'), '/one-again');
  assert.equal(board.lastOf(3)?.params.get('REQUEST_URI'), '/x');
  assert.equal(board.lastOf(5000)?.params.get('REQUEST_URI'), '/new');
});

test('requests in flight: added, walked, deleted in any order', () => {
  const board = new RequestBoard();
  const exs = [1, 2, 3].map((i) => {
    const ex = new Exchange(CgiParams.fromObject({ REQUEST_URI: `/${i}` }), sink(), 'fastcgi', i);
    ex.pool = 'p';
    board.add(ex);
    return ex;
  });
  assert.equal(board.inFlight, 3);
  assert.deepEqual(board.oldestQueued(), new Map([['p', 1]]));
  board.finished(exs[0]!, 20);
  assert.equal(board.inFlight, 2);
  assert.deepEqual(board.oldestQueued(), new Map([['p', 2]]));
  exs[2]!.workerPid = 77;
  assert.deepEqual([...board.runningByPid().keys()], [77]);
  board.finished(exs[2]!, 20);
  board.finished(exs[2]!, 21); // twice: no effect
  assert.equal(board.inFlight, 1);
});

test("a worker's last request is decoded once for status, and again only after its next request ends", () => {
  const board = new RequestBoard();
  finishOn(board, 9, '/a', 10, 20);
  const first = board.lastStatus(9, 100, 1_000_000)!;
  assert.equal(first.uri, '/a');
  assert.equal(first.durationMs, 10);
  assert.equal(board.lastStatus(9, 5_000, 1_004_900), first, 'an idle worker: the status made before, not a new decode');
  finishOn(board, 9, '/b', 6_000, 6_030);
  const next = board.lastStatus(9, 7_000, 1_006_900)!;
  assert.notEqual(next, first);
  assert.equal(next.uri, '/b', 'the next request shows, not the one kept');
  assert.equal(next.durationMs, 30);
  assert.equal(next.startedAt, 1_005_900);
  assert.equal(board.lastStatus(10, 7_000, 1_006_900), undefined);
});
