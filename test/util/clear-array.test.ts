/** clearArray: the array itself emptied, whatever it held. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clearArray } from '../../src/util/clear-array.js';

test('empties the array in place, from none, one or many members', () => {
  for (const n of [0, 1, 2, 1000]) {
    const a = Array.from({ length: n }, (_, i) => ({ i }));
    const same = a;
    clearArray(a);
    assert.equal(a.length, 0);
    assert.equal(a, same);
    a.push({ i: -1 });
    assert.deepEqual(a, [{ i: -1 }]);
  }
});
