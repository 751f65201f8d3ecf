import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClientDeadlines } from '../../src/frontend/client-deadlines.js';
import { FcgiRequest, RequestTable } from '../../src/frontend/fastcgi-request.js';
import type { ListenerConfig } from '../../src/config/types.js';
import type { FcgiSession } from '../../src/frontend/fastcgi-session.js';
import { ParamsCollector, Role } from '../../src/protocol/fastcgi.js';
import { DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';

const request = (id: number): FcgiRequest => new FcgiRequest({} as FcgiSession, id, Role.Responder, true, new ParamsCollector(DEFAULT_PARAMS_LIMITS));

test('RequestTable: one request, then multiplexed ones, found by id and forgotten one by one', () => {
  const t = new RequestTable();
  const [a, b, c] = [request(1), request(7), request(3)];
  t.add(a);
  assert.equal(t.get(1), a);
  assert.equal(t.has(7), false);
  t.add(b);
  t.add(c);
  assert.equal(t.size, 3);
  assert.deepEqual(t.values().map((r) => r.id).sort(), [1, 3, 7]);
  t.delete(a);
  assert.equal(t.get(1), undefined);
  assert.equal(t.get(7), b);
  // A request with the same id as one already gone is not deleted in its stead.
  t.delete(request(7));
  assert.equal(t.size, 2);
  const d = request(1);
  t.add(d);
  assert.equal(t.get(1), d);
  assert.equal(t.size, 3);
  for (const r of [b, c, d]) t.delete(r);
  assert.equal(t.size, 0);
  assert.deepEqual(t.values(), []);
  t.add(b);
  t.clear();
  assert.equal(t.size, 0);
  assert.equal(t.get(7), undefined);
});

test('FcgiRequest: its deadline node is made when first armed; stopping a request never armed makes none', () => {
  const deadlines = new ClientDeadlines({ headerTimeout: 60_000, bodyTimeout: 60_000 } as ListenerConfig);
  const whole = request(1);
  whole.stopDeadline(deadlines); // a GET that came whole: its PARAMS ended, then its STDIN
  whole.stopDeadline(deadlines);
  assert.equal((whole as unknown as { node: unknown }).node, undefined);
  const slow = request(2);
  deadlines.header.push(slow.deadline);
  assert.equal(deadlines.header.length, 1);
  assert.equal(slow.deadline, slow.deadline, 'one node for its life');
  slow.stopDeadline(deadlines);
  assert.equal(deadlines.header.length, 0);
  deadlines.bodyActive(slow.deadline);
  assert.equal(deadlines.body.length, 1);
  slow.stopDeadline(deadlines);
  assert.equal(deadlines.body.length, 0);
});
