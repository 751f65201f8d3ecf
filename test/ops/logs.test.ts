// Issue 5 acceptance, logs: log.file and log.access_file (a PHP-FPM-style %-format with
// slow requests marked), reopened on SIGUSR1 after logrotate-style moves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

function read(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

test('log files: access lines in their own %-format file, slow requests marked, SIGUSR1 reopens moved files', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-lg-');
  const port = await freePort();
  const mainLog = join(dir, 'fcgi-pm.log');
  const accessLog = join(dir, 'access.log');
  const d = await opsDaemon(t, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES }],
    // slow_request far above hello.php's time on a loaded machine (365 ms was seen at load 15), below sleep.php's 2 s.
    pools: { php: { command: ['php-cgi'], pm: 'dynamic', max_children: 2, slow_request: '1500ms' } },
    log: { file: mainLog, access_file: accessLog, access_format: '%R "%m %r%Q%q" %s %n %p %S %{milli}d' },
  }, { dir });
  const url = `http://127.0.0.1:${port}`;

  assert.equal((await httpRequest(`${url}/hello.php?n=1`)).status, 200);
  assert.equal((await httpRequest(`${url}/sleep.php?ms=2000`)).status, 200);
  await waitFor(() => read(accessLog).split('\n').length >= 3, { what: 'two access lines' });
  const lines = read(accessLog).trim().split('\n');
  assert.match(lines[0]!, /^127\.0\.0\.1 "GET \/hello\.php\?n=1" 200 php \d+ - \d+\.\d{3}$/);
  assert.match(lines[1]!, /^127\.0\.0\.1 "GET \/sleep\.php\?ms=2000" 200 php \d+ slow \d+\.\d{3}$/);
  assert.ok(Number(lines[1]!.split(' ').pop()) >= 2000);
  // The main log is JSON lines in its file, with the pool's own slow-request warning; stdout has none.
  await waitFor(() => read(mainLog).includes('slow request'), { what: 'the slow-request warning in the main log' });
  const main = read(mainLog).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.ok(main.some((l) => l.kind === 'ready'));
  assert.ok(main.some((l) => l.level === 40 && String(l.msg).startsWith('slow request')));
  assert.ok(!main.some((l) => l.kind === 'access'), 'access lines only in their own file');
  assert.equal(d.daemon.logs.length, 0, 'nothing on stdout');

  // logrotate: move both files away, then SIGUSR1.
  renameSync(mainLog, `${mainLog}.1`);
  renameSync(accessLog, `${accessLog}.1`);
  assert.equal((await httpRequest(`${url}/hello.php?n=2`)).status, 200);
  await waitFor(() => read(`${accessLog}.1`).includes('n=2'), { what: 'the moved file still written before the signal' });
  d.daemon.signal('SIGUSR1');
  await waitFor(() => read(mainLog).includes('SIGUSR1: reopened'), { what: 'a new main log with the reopen line' });
  assert.equal((await httpRequest(`${url}/hello.php?n=3`)).status, 200);
  await waitFor(() => read(accessLog).includes('n=3'), { what: 'the request after SIGUSR1 in the new access log' });
  assert.ok(!read(`${accessLog}.1`).includes('n=3'), 'nothing new in the rotated file');
  assert.equal(read(accessLog).trim().split('\n').length, 1);
  assert.ok(existsSync(`${mainLog}.1`) && read(`${mainLog}.1`).includes('"kind":"ready"'));
  assert.ok(d.daemon.running, 'SIGUSR1 did not stop (or debug) the daemon');
});
