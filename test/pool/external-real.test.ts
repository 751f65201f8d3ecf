/**
 * External pools over real sockets: a refused port and a real `php-cgi -b`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { createPool } from '../../src/pool/index.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { addr, makeRequest, poolConfig, recordingLogger, type TestRequest } from './helpers.js';

const T = { timeout: 60_000 };

function pidRequest(): TestRequest {
  return makeRequest({
    SCRIPT_FILENAME: join(PHP_FIXTURES, 'pid.php'),
    SCRIPT_NAME: '/pid.php',
    REQUEST_URI: '/pid.php',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: 'HTTP/1.1',
  });
}

test('a refused backend is marked down and requests go to the php-cgi that answers; all down → 502', T, async (t) => {
  const dir = makeTempDir(t, 'fpm-ext-');
  const php = await startPhpCgi(t, join(dir, 'php.sock'));
  const deadPort = await freePort(); // nothing listens there: connect is refused
  const { logger, lines } = recordingLogger();
  const pool = createPool(
    poolConfig({ name: 'ext', backends: [addr(`127.0.0.1:${deadPort}`), addr(`unix:${php.address}`)], backendDownTime: 60_000 }),
    { logger, runtimeDir: dir },
  );
  t.after(() => pool.stop(0));
  await pool.start();

  const answers: TestRequest[] = [];
  for (let i = 0; i < 4; i++) {
    const r = pidRequest();
    pool.dispatch(r.ex);
    await withTimeout(r.sink.answered, 10_000, 'answer');
    answers.push(r);
  }
  for (const r of answers) {
    assert.equal(r.sink.status, 200, r.sink.error?.message);
    assert.equal(Number(r.sink.text()), php.pid);
  }
  // The first request tried the dead port (round-robin start), was refused and went on.
  const s = pool.snapshot();
  assert.deepEqual(
    s.backends.map((b) => [b.address, b.down]),
    [
      [`127.0.0.1:${deadPort}`, true],
      [`unix:${php.address}`, false],
    ],
  );
  assert.equal(lines.filter((l) => l.level === 40 && String(l.msg).includes('marked down')).length, 1);
  assert.equal(s.completed, 4);

  // php-cgi goes away too: the next request finds every backend down.
  await php.stop();
  const r = pidRequest();
  pool.dispatch(r.ex);
  await withTimeout(r.sink.answered, 10_000, 'answer');
  assert.equal(r.sink.status, 502);
  assert.equal(r.sink.error?.code, ErrorCodes.ALL_BACKENDS_DOWN, r.sink.error?.message);
  const late = pidRequest();
  pool.dispatch(late.ex);
  assert.equal(late.sink.error?.code, ErrorCodes.ALL_BACKENDS_DOWN, 'answered at once while all are down');
});
