import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DenseSet } from '../../src/util/dense-set.js';

class Member {
  slot = -1;
  constructor(readonly n: number) {}
}

test('DenseSet behaves as a Set under any sequence of adds and deletes', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 9 })), { maxLength: 200 }), (ops) => {
      const members = Array.from({ length: 10 }, (_, i) => new Member(i));
      const dense = new DenseSet<Member, 'slot'>('slot');
      const model = new Set<Member>();
      for (const [add, i] of ops) {
        const m = members[i]!;
        if (add) {
          dense.add(m);
          model.add(m);
        } else {
          assert.equal(dense.delete(m), model.delete(m));
        }
        assert.equal(dense.size, model.size);
        for (const x of members) assert.equal(dense.has(x), model.has(x));
      }
      const seen: number[] = [];
      dense.forEach((m) => seen.push(m.n));
      assert.deepEqual(seen.sort(), [...model].map((m) => m.n).sort());
    }),
  );
});

test('two sets with different fields hold the same member; snapshot and clear', () => {
  class Two {
    a = -1;
    b = -1;
  }
  const x = new Two();
  const y = new Two();
  const sa = new DenseSet<Two, 'a'>('a');
  const sb = new DenseSet<Two, 'b'>('b');
  sa.add(x);
  sa.add(y);
  sb.add(y);
  const snap = sa.snapshot();
  for (const m of snap) sa.delete(m);
  assert.equal(sa.size, 0);
  assert.equal(snap.length, 2);
  assert.equal(sb.has(y), true);
  assert.equal(sb.has(x), false);
  sb.clear();
  assert.equal(y.b, -1);
  assert.equal(sb.has(y), false);
});
