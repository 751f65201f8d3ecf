/**
 * The daemon's log as an operator sees it, with a real Python worker (bin/fcgi-pm-wsgi
 * and test/fixtures/workers/log_app.py) behind an HTTP listener: a traceback is one
 * entry, every warning has a documented code, no line repeats a key.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { startDaemon, LogLevel, type Daemon, type LogLine } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { duplicateTopLevelKeys } from '../helpers/log.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';

const WSGI = join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi');
const APPS = join(REPO_ROOT, 'test', 'fixtures', 'workers');

describe('daemon log with a Python worker', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let url: string;

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    daemon = await startDaemon(scope, {
      listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'py' }],
      pools: { py: { command: ['python3', '-B', WSGI, '--path', APPS, 'log_app:app'], pm: 'ondemand', max_children: 2, request_timeout: '1s', kill_timeout: '1s' } },
      log: { level: 'info', access: true },
    });
  });
  after(() => scope.run());

  const isTraceback = (text: unknown): boolean => typeof text === 'string' && text.includes('Traceback (most recent call last):');

  it("a traceback on the worker's stderr is one entry, whole, with its code", async () => {
    const since = daemon.mark();
    assert.equal((await httpRequest(`${url}/traceback`)).status, 200);
    const entry = await daemon.waitForLog((l) => l.code === ErrorCodes.WORKER_STDERR && isTraceback(l.msg), { since, what: 'the traceback entry' });
    const text = String(entry.msg);
    assert.ok(text.startsWith('Traceback (most recent call last):'), text);
    assert.match(text, /\n {2}File ".*log_app\.py", line \d+, in fail\n/);
    assert.ok(text.endsWith('ValueError: log test failure'), `the exception line closes the same entry:\n${text}`);
    assert.equal(entry.level, LogLevel.warn);
    assert.equal(entry.stream, 'stderr');
    const pieces = daemon.logsSince(since).filter((l) => l.code === ErrorCodes.WORKER_STDERR);
    assert.deepEqual(pieces.map((l) => l.msg), [text], 'no line of it logged on its own');
  });

  it('a traceback written to wsgi.errors (FastCGI STDERR, one record per line) is one entry', async () => {
    const since = daemon.mark();
    assert.equal((await httpRequest(`${url}/wsgi-errors`)).status, 200);
    const entry = await daemon.waitForLog((l) => l.code === ErrorCodes.BACKEND_STDERR && isTraceback(l.stderr), { since, what: 'the STDERR entry' });
    assert.ok(String(entry.stderr).endsWith('ValueError: log test failure'), String(entry.stderr));
    assert.equal(entry.uri, '/wsgi-errors');
  });

  it('a request past request_timeout: 504, and its warnings carry ERR_REQUEST_TIMEOUT', async () => {
    const since = daemon.mark();
    assert.equal((await httpRequest(`${url}/sleep`, { timeout: 15_000 })).status, 504);
    const warn = await daemon.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('past request_timeout'), { since });
    assert.equal(warn.code, ErrorCodes.REQUEST_TIMEOUT);
    assert.equal(warn.level, LogLevel.warn);
    const exit = await daemon.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('killed after request_timeout'), { since });
    assert.equal(exit.code, ErrorCodes.REQUEST_TIMEOUT);
    assert.equal(typeof exit.signal, 'string', 'the exit line keeps the signal; its exit status is exitCode');
  });

  it('no line repeats a key (worker lines used to carry "pool" twice)', () => {
    const workerLines = daemon.rawLogs.filter((l) => l.includes('"worker":'));
    assert.ok(workerLines.length > 0);
    for (const raw of daemon.rawLogs) assert.deepEqual(duplicateTopLevelKeys(raw), [], raw);
  });

  it('every warn/error line names a code from the table', () => {
    const known = new Set<unknown>(Object.values(ErrorCodes));
    const warnings = daemon.logs.filter((l: LogLine) => typeof l.level === 'number' && l.level >= LogLevel.warn);
    assert.ok(warnings.length >= 4, daemon.dump());
    for (const w of warnings) assert.ok(known.has(w.code), JSON.stringify(w));
  });
});
