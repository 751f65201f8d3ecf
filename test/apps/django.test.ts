/**
 * Issue 6: the Django example (examples/django) on Debian's python3-django, run by
 * fcgi-pm from examples/django/fcgi-pm.yaml through bin/fcgi-pm-wsgi, behind nginx over
 * FastCGI (nginx-fastcgi.conf) and over SCGI (nginx-scgi.conf), Django under /app/.
 *
 * The config is the example's, with free ports, a database in a temp dir and
 * idle_timeout 1s (so the idle stop is seen quickly).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, LogLevel, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { bigSha256, seededBytes, sha256 } from '../helpers/payload.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { CookieJar, csrfToken, formBody, getWithCookies, multipartUpload } from './browser.js';
import { exampleConfig, migrateDjango, soakSeconds, WORKLOAD_COUNTS } from './examples.js';
import { soak } from './load.js';
import { startNginxSite, type FrontEnd } from './servers.js';
import { exampleFile } from './templates.js';

const MB = 1048576;
const ADAPTER = 'fcgi-pm-wsgi';

describe('Django example behind nginx (FastCGI and SCGI) via fcgi-pm-wsgi', { timeout: 150_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let viaFastcgi: FrontEnd;
  let viaScgi: FrontEnd;
  const adapters = (flag = ''): number[] => daemon.descendants(ADAPTER).filter((pid) => !flag || cmdline(pid).includes(flag));

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-dj-');
    const db = join(dir, 'db.sqlite3');
    migrateDjango(db);
    const [fcgiPort, scgiPort, web1, web2] = [await freePort(), await freePort(), await freePort(), await freePort()];
    // The soak below starts from zero (idle_timeout 1s): on a loaded 2-core machine four
    // Django workers importing at once take longer than the default queue_timeout (5s), and
    // what the soak checks is the answers, not how long a cold start may keep them waiting.
    const poolOverride = { idle_timeout: '1s', queue_timeout: '30s', env: { DJANGO_DB_PATH: db } };
    daemon = await startDaemon(
      scope,
      exampleConfig('django/fcgi-pm.yaml', {
        listen: { '127.0.0.1:9001': `127.0.0.1:${fcgiPort}`, '127.0.0.1:9002': `127.0.0.1:${scgiPort}` },
        pools: { django: poolOverride, 'django-scgi': poolOverride },
      }),
    );
    viaFastcgi = await startNginxSite(
      scope,
      exampleFile('django/nginx-fastcgi.conf', [['listen 127.0.0.1:8080', `listen 127.0.0.1:${web1}`], ['127.0.0.1:9001', `127.0.0.1:${fcgiPort}`]]),
      web1,
    );
    viaScgi = await startNginxSite(
      scope,
      exampleFile('django/nginx-scgi.conf', [['listen 127.0.0.1:8080', `listen 127.0.0.1:${web2}`], ['127.0.0.1:9002', `127.0.0.1:${scgiPort}`]]),
      web2,
    );
  });
  after(() => scope.run());

  it('runs no adapter process before the first request (pm ondemand)', () => {
    assert.deepEqual(adapters(), []);
  });

  for (const [name, front, flag] of [
    ['FastCGI', () => viaFastcgi, '--fastcgi'],
    ['SCGI', () => viaScgi, '--scgi'],
  ] as const) {
    describe(`through nginx ${name}`, () => {
      const url = (path: string): string => `${front().url}/app${path}`;

      it('the first request spawns the adapter, seen in /proc', async () => {
        const r = await httpRequest(url('/'));
        assert.equal(r.status, 200, r.text.slice(0, 500));
        const pids = adapters(flag);
        assert.ok(pids.length >= 1, `a ${flag} adapter runs: ${daemon.descendants(ADAPTER).map(cmdline).join(' | ')}`);
        // Links are built by reverse(): they carry the /app prefix (SCRIPT_NAME).
        assert.match(r.text, /href="\/app\/page\/"/);
        assert.match(r.text, /href="\/app\/hello\/w%C3%B6rld%20%E2%9C%93\/\?q=/);
      });

      it('the 8,750-byte page', async () => {
        const r = await httpRequest(url('/page/'));
        assert.equal(r.status, 200);
        assert.equal(r.body.length, 8750);
        assert.match(String(r.headers['content-type']), /^text\/html; charset=utf-8/);
        assert.match(r.text, /<h1>A page of 8,750 bytes<\/h1>/);
        assert.match(r.text, /<\/html>\n<!-- \.+ -->\n$/);
      });

      it('the SQLite workload page returns the counts', async () => {
        const r = await httpRequest(url('/db/'));
        assert.equal(r.status, 200, r.text.slice(0, 500));
        assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
      });

      it('CSRF-protected form: GET form, POST with cookie and token, redirect under /app/', async () => {
        const jar = new CookieJar();
        const form = await getWithCookies(url('/form/'), jar);
        assert.equal(form.status, 200);
        const token = csrfToken(form.text);
        assert.ok(jar.cookies.has('csrftoken'), 'csrftoken cookie set');
        const post = await httpRequest(url('/form/'), {
          method: 'POST',
          headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
          body: formBody({ csrfmiddlewaretoken: token, name: 'Zoë ✓', message: 'hello' }),
        });
        assert.equal(post.status, 302, post.text.slice(0, 300));
        assert.equal(post.headers.location, '/app/form/thanks/?name=Zo%C3%AB+%E2%9C%93');
        const thanks = await getWithCookies(`${front().url}${post.headers.location}`, jar);
        assert.equal(thanks.status, 200);
        assert.match(thanks.text, /Thank you, Zoë ✓/);
      });

      it('the form refuses a POST without the CSRF token (403)', async () => {
        const r = await httpRequest(url('/form/'), {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: formBody({ name: 'x' }),
        });
        assert.equal(r.status, 403);
      });

      it('a 5 MB file upload: Django returns its sha256', async () => {
        const jar = new CookieJar();
        const token = csrfToken((await getWithCookies(url('/upload/'), jar)).text);
        const { res, sha256: expected } = await multipartUpload(
          url('/upload/'),
          { csrfmiddlewaretoken: token },
          { field: 'file', name: 'données.bin', block: seededBytes(MB, 11), bytes: 5 * MB },
          { cookie: jar.header() },
        );
        assert.equal(res.status, 200, res.text.slice(0, 500));
        assert.deepEqual(JSON.parse(res.text), { name: 'données.bin', bytes: 5 * MB, sha256: expected });
      });

      it('Unicode in the path and the query string', async () => {
        const r = await httpRequest(url('/hello/%C3%9Cn%C3%AFc%C3%B6d%C3%A9%20%E2%9C%93/?q=%E2%9C%93+ok&x=%C3%A9'));
        assert.equal(r.status, 200, r.text.slice(0, 300));
        assert.deepEqual(JSON.parse(r.text), {
          name: 'Ünïcödé ✓',
          q: '✓ ok',
          path: '/app/hello/Ünïcödé ✓/',
          path_info: '/hello/Ünïcödé ✓/',
          script_name: '/app',
          url: '/app/hello/%C3%9Cn%C3%AFc%C3%B6d%C3%A9%20%E2%9C%93/',
        });
        const cafe = await httpRequest(url('/caf%C3%A9/'));
        assert.equal(cafe.status, 200);
        assert.equal(cafe.text, 'café ☕\n');
      });

      it('a 16 MiB StreamingHttpResponse arrives whole', async () => {
        const r = await httpRequest(url('/stream/?mb=16'), { timeout: 60_000 });
        assert.equal(r.status, 200);
        assert.equal(r.headers['content-length'], undefined, 'streamed: no Content-Length');
        assert.equal(r.body.length, 16 * MB);
        assert.equal(sha256(r.body), bigSha256(16));
      });

      it('/app redirects to /app/ and unknown pages are 404', async () => {
        const r = await httpRequest(`${front().url}/app`);
        assert.equal(r.status, 301);
        assert.match(String(r.headers.location), /\/app\/$/);
        assert.equal((await httpRequest(url('/no-such-page/'))).status, 404);
      });
    });
  }

  it(`the workload under 20 concurrent clients for ${soakSeconds()} s: correct counts, zero errors`, { timeout: (soakSeconds() + 60) * 1000 }, async (t) => {
    const result = await soak([`${viaFastcgi.url}/app/db/`, `${viaScgi.url}/app/db/`], 20, soakSeconds(), (r) => {
      if (r.status !== 200) return `status ${r.status}: ${r.text.slice(0, 200)}`;
      try {
        assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
      } catch {
        return `wrong counts: ${r.text.slice(0, 200)}`;
      }
      return undefined;
    });
    t.diagnostic(`${result.requests} requests: ${JSON.stringify(result.perUrl)}`);
    assert.deepEqual(result.errors.slice(0, 10), []);
    assert.ok(result.requests >= 40, `only ${result.requests} requests`);
  });

  it('stops every adapter once idle (idle_timeout 1s), seen in /proc', async () => {
    assert.ok(adapters().length > 0);
    await waitFor(() => adapters().length === 0, { timeout: 15_000, interval: 100, what: `idle adapters to exit (left: ${adapters().join(',')})` });
  });

  it('logged no errors; Django wrote no traceback', (t) => {
    for (const w of daemon.warningsSince(0).slice(0, 10)) t.diagnostic(`warning: ${JSON.stringify(w).slice(0, 300)}`);
    const errors = daemon.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
    assert.equal(errors.length, 0, JSON.stringify(errors.slice(0, 5)));
    assert.doesNotMatch(JSON.stringify(daemon.logs), /Traceback/);
  });
});

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ');
  } catch {
    return '';
  }
}
