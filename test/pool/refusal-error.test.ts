/**
 * Routine 503s are built without a stack (capturing one per refused request is the
 * costly part of an Error) but keep the error's shape: class, code, status, Retry-After.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ErrorCodes, ProxyError, refusalError } from '../../src/errors.js';

test('a refusal error has no stack frames and the ProxyError shape', () => {
  const before = Error.stackTraceLimit;
  const e = refusalError(ErrorCodes.QUEUE_FULL, 503, 'pool php: queue full (10 waiting)', 1);
  assert.ok(e instanceof ProxyError);
  assert.equal(e.code, ErrorCodes.QUEUE_FULL);
  assert.equal(e.status, 503);
  assert.equal(e.retryAfter, 1);
  assert.equal(e.message, 'pool php: queue full (10 waiting)');
  assert.doesNotMatch(e.stack ?? '', /\n\s+at /);
  assert.equal(Error.stackTraceLimit, before, 'the global limit is restored');
  assert.match(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'x').stack ?? '', /\n\s+at /, 'other errors keep their stack');
});
