/**
 * Issue 6: the PHP example (examples/php) with SQLite, run by fcgi-pm from
 * examples/php/fcgi-pm.yaml (php-cgi spawned on demand) behind nginx
 * (examples/php/nginx.conf). Free ports, a database in a temp dir, idle_timeout 1s.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startDaemon, LogLevel, type Daemon } from '../helpers/daemon.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { exampleConfig, PHP_PUBLIC, soakSeconds, WORKLOAD_COUNTS } from './examples.js';
import { soak } from './load.js';
import { startNginxSite, type FrontEnd } from './servers.js';
import { exampleFile } from './templates.js';

describe('PHP example behind nginx via fcgi-pm (php-cgi on demand, SQLite)', { timeout: 120_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let web: FrontEnd;
  const workers = (): number[] => daemon.descendants('php-cgi');

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-php-');
    const port = await freePort();
    const webPort = await freePort();
    daemon = await startDaemon(
      scope,
      exampleConfig('php/fcgi-pm.yaml', {
        listen: { '127.0.0.1:9003': `127.0.0.1:${port}` },
        pools: { php: { idle_timeout: '1s', env: { APP_DB_PATH: join(dir, 'app.sqlite3') } } },
      }),
    );
    web = await startNginxSite(
      scope,
      exampleFile('php/nginx.conf', [
        ['listen 127.0.0.1:8080', `listen 127.0.0.1:${webPort}`],
        ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
        ['127.0.0.1:9003', `127.0.0.1:${port}`],
      ]),
      webPort,
    );
  });
  after(() => scope.run());

  it('runs no php-cgi before the first request', () => {
    assert.deepEqual(workers(), []);
  });

  it('the index spawns php-cgi, seen in /proc', async () => {
    const r = await httpRequest(`${web.url}/`);
    assert.equal(r.status, 200);
    assert.match(r.text, /href="page\.php"/);
    assert.ok(workers().length >= 1, 'a php-cgi worker runs');
  });

  it('the 8,750-byte page', async () => {
    const r = await httpRequest(`${web.url}/page.php`);
    assert.equal(r.status, 200);
    assert.equal(r.body.length, 8750);
    assert.match(String(r.headers['content-type']), /^text\/html; charset=utf-8/);
    assert.match(r.text, /<\/html>\n<!-- \.+ -->\n$/);
  });

  it('the SQLite workload page returns the counts', async () => {
    const r = await httpRequest(`${web.url}/db.php`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
  });

  it('PATH_INFO, Unicode query and POST body reach PHP', async () => {
    const r = await httpRequest(`${web.url}/echo.php/extra/caf%C3%A9?x=%E2%9C%93`);
    assert.equal(r.status, 200);
    const j = JSON.parse(r.text);
    assert.equal(j.cgi.SCRIPT_NAME, '/echo.php');
    assert.equal(j.cgi.PATH_INFO, '/extra/café');
    assert.equal(j.cgi.SCRIPT_FILENAME, join(PHP_PUBLIC, 'echo.php'));
    assert.deepEqual(j.get, { x: '✓' });
    const body = seededBytes(3 * 1048576, 5);
    const p = await httpUpload(`${web.url}/echo.php`, body, body.length);
    assert.equal(p.status, 200);
    assert.equal(JSON.parse(p.text).body_sha256, sha256(body));
  });

  it('a missing script is 404 from nginx (try_files), not a PHP error', async () => {
    assert.equal((await httpRequest(`${web.url}/nope.php`)).status, 404);
  });

  it(`the workload under 20 concurrent clients for ${soakSeconds()} s: correct counts, zero errors`, { timeout: (soakSeconds() + 60) * 1000 }, async (t) => {
    const result = await soak([`${web.url}/db.php`], 20, soakSeconds(), (r) => {
      if (r.status !== 200) return `status ${r.status}: ${r.text.slice(0, 200)}`;
      try {
        assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
      } catch {
        return `wrong counts: ${r.text.slice(0, 200)}`;
      }
      return undefined;
    });
    t.diagnostic(`${result.requests} requests`);
    assert.deepEqual(result.errors.slice(0, 10), []);
    assert.ok(result.requests >= 40, `only ${result.requests} requests`);
  });

  it('stops every php-cgi once idle (idle_timeout 1s), seen in /proc', async () => {
    await waitFor(() => workers().length === 0, { timeout: 15_000, interval: 100, what: `idle php-cgi to exit (left: ${workers().join(',')})` });
  });

  it('logged no errors', (t) => {
    for (const w of daemon.warningsSince(0).slice(0, 10)) t.diagnostic(`warning: ${JSON.stringify(w).slice(0, 300)}`);
    const errors = daemon.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
    assert.equal(errors.length, 0, JSON.stringify(errors.slice(0, 5)));
  });
});
