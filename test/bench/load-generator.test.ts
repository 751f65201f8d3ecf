// bench/overload's and bench/fairness's load generators run apart from the bench: a process and session of its
// own (its own autogroup, raised as root), so that it does not queue for the CPU behind the
// workers it overloads; and it keeps each request's times when asked (--hops).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GENERATOR_NICE, closedLoopApart, openLoopApart } from '../../bench/load-generator.js';

function sessionOf(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

async function refusingOddIds(t: { after(fn: () => unknown): void }): Promise<string> {
  const server = http.createServer((req, res) => {
    const id = Number(new URL(req.url!, 'http://x').searchParams.get('i'));
    res.writeHead(id % 2 === 1 ? 503 : 200);
    res.end('x');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function apartFromUs(client: { session: number; autogroup: string }): void {
  assert.notEqual(client.session, sessionOf('self'), 'the generator leads a session of its own');
  if (process.getuid?.() === 0 && client.autogroup !== '–') assert.match(client.autogroup, new RegExp(`nice ${GENERATOR_NICE}$`));
}

test('open loop: a process and session of its own, on schedule, every request traced by its id', { timeout: 20_000 }, async (t) => {
  // Odd ids are refused, even ones served: the counts and the trace must agree with the ids sent.
  const url = await refusingOddIds(t);
  const t0 = Date.now();
  const r = await openLoopApart(url, 200, 0.5, 5000, true, 1000);
  assert.equal(r.sent, 100);
  assert.equal(r.errors, 0);
  assert.equal(r.served, 50);
  assert.equal(r.refused, 50);
  apartFromUs(r.client);
  // When each answered request was due (the onset table): ids 1000, 1002, ... served, due every 10 ms.
  assert.deepEqual([...r.servedDue].sort((a, b) => a - b), Array.from({ length: 50 }, (_, k) => k * 10));
  assert.deepEqual([...r.refusedDue].sort((a, b) => a - b), Array.from({ length: 50 }, (_, k) => k * 10 + 5));
  const trace = r.trace!;
  assert.deepEqual([...trace.keys()].sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => 1000 + i));
  for (const [id, h] of trace) {
    assert.equal(h.status, id % 2 === 1 ? 503 : 200);
    assert.ok(h.dueAt >= t0 - 1000 && h.sentAt >= h.dueAt - 1 && h.endAt >= h.sentAt, JSON.stringify(h));
  }
  // On schedule: the 100th request was due 495 ms after the first.
  assert.ok(Math.abs(trace.get(1099)!.dueAt - trace.get(1000)!.dueAt - 495) < 1, 'due times follow the rate');
});

test('closed loop: a process and session of its own, each client waits for its answer on one kept-alive connection', { timeout: 20_000 }, async (t) => {
  const url = await refusingOddIds(t);
  const r = await closedLoopApart(url, 2, 0.3);
  apartFromUs(r.client);
  assert.equal(r.errors, 0);
  assert.ok(r.ms.length > 10, `${r.ms.length} answers`);
  // No id in the URL: every answer is a 200.
  assert.deepEqual(r.statuses, { 200: r.ms.length });
});
