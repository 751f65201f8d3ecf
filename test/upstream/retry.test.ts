/**
 * "May this request go to another backend?" (src/upstream/retry.ts), row by row: the
 * facts of a failed attempt and the verdict an operator would want.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIdempotent, mayRetryElsewhere, type AttemptFacts } from '../../src/upstream/retry.js';

const base: AttemptFacts = { failure: 'closed', headSent: true, responseBytes: false, reused: false, reset: false, idempotent: false };

// [what happened, facts that differ from base, retry?]
const rows: Array<[string, Partial<AttemptFacts>, boolean]> = [
  ['connection refused / no socket / full accept queue', { failure: 'connect', headSent: false }, true],
  ['connect timed out', { failure: 'connect', headSent: false }, true],
  ['FCGI_OVERLOADED after the head went out (an END_REQUEST is a response byte)', { failure: 'declined', responseBytes: true }, true],
  ['fcgi-pm closed it before the head went out', { failure: 'cancelled', headSent: false }, true],
  ['fcgi-pm closed it after the head went out', { failure: 'cancelled' }, false],
  ['closed before our head left us (the write failed)', { headSent: false }, true],
  ['closed before our head left us, a POST on a fresh connection', { headSent: false, reused: false }, true],
  ['reused connection reset before any response byte (php-cgi at PHP_FCGI_MAX_REQUESTS)', { reused: true, reset: true }, true],
  ['reused connection, EOF before any response byte, GET', { reused: true, idempotent: true }, true],
  ['reused connection, EOF before any response byte, POST: it may have run', { reused: true }, false],
  ['fresh connection reset before any response byte, POST: backlog of an exiting backend or a crash', { reset: true }, false],
  ['fresh connection reset before any response byte, GET: not provable either', { reset: true, idempotent: true }, false],
  ['fresh connection EOF, POST', {}, false],
  ['fresh connection reset, the process exited cleanly between requests (spawned pool)', { reset: true, cleanExit: true }, true],
  ['fresh connection EOF, the process exited cleanly (spawned pool)', { cleanExit: true }, true],
  ['a clean exit after response bytes: it ran', { cleanExit: true, responseBytes: true }, false],
  ['reused connection reset after a response byte', { reused: true, reset: true, responseBytes: true }, false],
  ['closed mid-response, GET', { responseBytes: true, idempotent: true }, false],
  ['read_timeout, GET: it may still run', { failure: 'read_timeout', idempotent: true }, false],
  ['read_timeout before the head went out is still a timeout', { failure: 'read_timeout', headSent: false }, false],
  ['protocol fault', { failure: 'protocol', responseBytes: true }, false],
  ['unencodable request: no backend takes it', { failure: 'unencodable', headSent: false }, false],
];

for (const [what, over, retry] of rows) {
  test(`${retry ? 'retry' : 'no retry'}: ${what}`, () => {
    const v = mayRetryElsewhere({ ...base, ...over });
    assert.equal(v.retry, retry, v.why);
    assert.ok(v.why.length > 0);
  });
}

test('idempotent methods are GET, HEAD and OPTIONS', () => {
  assert.deepEqual(['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'DELETE', 'PATCH', undefined].map(isIdempotent), [true, true, true, false, false, false, false, false]);
});
