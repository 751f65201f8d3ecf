/**
 * `authorizer: POOL` end to end: nginx (FastCGI) and fcgi-pm's own HTTP listener in front
 * of php-cgi pools guarded by a php-cgi authorizer pool (its file named with `script`).
 * A grant reaches PHP's $_SERVER, a deny's 401 (challenge and body) reaches the client,
 * an authorizer that is unreachable or crashes denies with 503 and the protected pool
 * never sees the request; a POST body arrives whole after a grant, and a denied one is
 * answered without hanging the connection; kept grants spare the authorizer.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { LogLevel } from '../helpers/daemon.js';
import { httpRequest, keepAliveAgent } from '../helpers/http-client.js';
import { fastcgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import http2 from 'node:http';
import { opsDaemon, type OpsDaemon } from '../ops/helpers.js';

const FIXTURES = join(REPO_ROOT, 'test', 'fixtures', 'authorizer');
/** Guarded pools, each at /NAME/page.php: app (no cache), cached, down (authorizer unreachable), crash (authorizer dies), slow and hang (authorizers that sleep ?ms=, with and without a short read_timeout). */
const GUARDED = ['app', 'cached', 'down', 'crash', 'slow', 'hang'] as const;
type Guarded = (typeof GUARDED)[number];
const GOOD = { authorization: 'Bearer good' };

interface PoolCounts {
  accepted: number;
  outcomes?: { authorizer?: { allowed: number; cached: number; denied: number; failed: number } };
}

describe('authorizer: POOL in front of php-cgi pools', { timeout: 120_000 }, () => {
  const scope = new Cleanup();
  let d: OpsDaemon;
  let nginx: Nginx;
  const http: Partial<Record<Guarded, string>> = {};
  /** A vhosts HTTP listener: site locked.test (pool settings with `authorizer: auth`), open.test (none). */
  let sites: string;
  let config: Record<string, unknown>;

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-authz-');
    const root = join(dir, 'www');
    for (const name of GUARDED) {
      mkdirSync(join(root, name), { recursive: true });
      copyFileSync(join(FIXTURES, 'page.php'), join(root, name, 'page.php'));
    }
    const listen: Array<Record<string, unknown>> = [];
    const fcgiPorts: Partial<Record<Guarded, number>> = {};
    for (const name of GUARDED) {
      const hp = await freePort();
      const fp = await freePort();
      http[name] = `http://127.0.0.1:${hp}`;
      fcgiPorts[name] = fp;
      listen.push({ protocol: 'http', address: `127.0.0.1:${hp}`, pool: name, document_root: root });
      listen.push({ protocol: 'fastcgi', address: `127.0.0.1:${fp}`, pool: name });
    }
    writeFileSync(join(root, 'app', 'secret.txt'), 'a static file of a guarded pool\n');
    const sitesDir = join(dir, 'sites');
    mkdirSync(sitesDir);
    writeFileSync(join(sitesDir, 'locked.yaml'), `names: [locked.test]\ndocument_root: ${join(root, 'app')}\npool: { authorizer: auth }\n`);
    writeFileSync(join(sitesDir, 'open.yaml'), `names: [open.test]\ndocument_root: ${join(root, 'app')}\n`);
    const vp = await freePort();
    sites = `http://127.0.0.1:${vp}`;
    listen.push({ protocol: 'http', address: `127.0.0.1:${vp}`, vhosts: true });
    const php = (marker: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ command: phpCommand(dir, marker), max_children: 2, ...extra });
    config = {
      listen,
      vhosts: { dir: sitesDir, defaults: php('authz-site') },
      pools: {
        auth: php('authz-auth', { script: join(FIXTURES, 'auth.php') }),
        // Nothing listens there: every authorizer request fails to connect.
        gone: { backends: [`127.0.0.1:${await freePort()}`], connect_timeout: '2s' },
        crasher: php('authz-crasher', { script: join(PHP_FIXTURES, 'crash.php'), crash_limit: 0 }),
        sleeper: php('authz-sleeper', { script: join(PHP_FIXTURES, 'sleep.php'), read_timeout: '1s' }),
        hanger: php('authz-hanger', { script: join(PHP_FIXTURES, 'sleep.php') }),
        app: php('authz-app', { authorizer: 'auth' }),
        cached: php('authz-cached', { authorizer: 'auth', authorizer_cache: '60s', authorizer_cache_key: ['HTTP_AUTHORIZATION', 'REQUEST_URI/1'] }),
        down: php('authz-down', { authorizer: 'gone' }),
        crash: php('authz-crash', { authorizer: 'crasher' }),
        slow: php('authz-slow', { authorizer: 'sleeper' }),
        hang: php('authz-hang', { authorizer: 'hanger' }),
      },
    };
    d = await opsDaemon(scope, config, { dir });
    const locations = GUARDED.map((name) => `
    location /${name}/ {
      ${fastcgiParams()}
      fastcgi_keep_conn on;
      fastcgi_pass fpm_${name};
    }`).join('\n');
    nginx = await startNginx(scope, `root ${root};\n${locations}`, {
      httpExtra: GUARDED.map((name) => `upstream fpm_${name} { server 127.0.0.1:${fcgiPorts[name]}; keepalive 2; }`).join('\n'),
    });
  });
  after(() => scope.run());

  async function pools(): Promise<Record<string, PoolCounts>> {
    const r = await d.ctl(['status', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const out: Record<string, PoolCounts> = {};
    for (const p of JSON.parse(r.stdout).pools as Array<PoolCounts & { name: string }>) out[p.name] = p;
    return out;
  }

  const fronts: Array<[string, (name: Guarded) => string]> = [
    ['nginx (FastCGI)', () => nginx.url],
    ['the HTTP listener', (name) => http[name]!],
  ];

  for (const [front, base] of fronts) {
    it(`${front}: a grant lets the request through with the Variable- values in PHP's $_SERVER`, async () => {
      const before = await pools();
      const r = await httpRequest(`${base('app')}/app/page.php?x=1`, { headers: GOOD });
      assert.equal(r.status, 200, r.text);
      const seen = JSON.parse(r.text);
      assert.equal(seen.remote_user, 'ann');
      assert.equal(seen.authz_role, 'AUTHORIZER', 'php-cgi played the authorizer role');
      assert.equal(seen.authz_uri, '/app/page.php?x=1', 'the authorizer was asked about this request');
      assert.equal(seen.authz_absent, 'CONTENT_LENGTH,PATH_INFO,PATH_TRANSLATED');
      assert.match(seen.script, /\/app\/page\.php$/, 'the protected pool ran its own script');
      assert.doesNotMatch(r.text, /dropped/, "a grant's body never reaches the client");
      const now = await pools();
      assert.equal(now.auth!.accepted, before.auth!.accepted + 1);
      assert.equal(now.app!.accepted, before.app!.accepted + 1);
      assert.equal(now.app!.outcomes!.authorizer!.allowed, (before.app!.outcomes?.authorizer?.allowed ?? 0) + 1);
    });

    it(`${front}: a deny's status, challenge and body reach the client; PHP never ran`, async () => {
      const before = await pools();
      const since = d.daemon.mark();
      const r = await httpRequest(`${base('app')}/app/page.php`, { headers: { authorization: 'Bearer bad' } });
      assert.equal(r.status, 401);
      assert.equal(r.headers['www-authenticate'], 'Bearer realm="fixture"');
      assert.equal(r.text, 'denied by auth.php (role AUTHORIZER)\n');
      const now = await pools();
      assert.equal(now.app!.accepted, before.app!.accepted, 'the protected pool was not given the request');
      assert.equal(now.app!.outcomes!.authorizer!.denied, (before.app!.outcomes?.authorizer?.denied ?? 0) + 1);
      const line = await d.daemon.waitForLog((l) => l.kind === 'access' && l.status === 401, { since });
      assert.equal(line.authorizer, 'denied');
      assert.equal(line.pool, 'app');
    });

    it(`${front}: a POST body arrives whole after a grant; a denied POST is answered and the connection goes on`, async () => {
      const body = seededBytes(1024 * 1024, 5);
      const agent = keepAliveAgent(1);
      try {
        const ok = await httpRequest(`${base('app')}/app/page.php`, { method: 'POST', body, headers: GOOD, agent });
        assert.equal(ok.status, 200, ok.text);
        const seen = JSON.parse(ok.text);
        assert.equal(seen.method, 'POST');
        assert.equal(seen.body_length, body.length);
        assert.equal(seen.body_sha256, sha256(body));
        const denied = await httpRequest(`${base('app')}/app/page.php`, { method: 'POST', body, headers: { authorization: 'Bearer bad' }, agent, timeout: 20_000 });
        assert.equal(denied.status, 401);
        assert.match(denied.text, /^denied by auth\.php/);
        const after = await httpRequest(`${base('app')}/app/page.php`, { headers: GOOD, agent });
        assert.equal(after.status, 200, after.text);
      } finally {
        agent.destroy();
      }
    });

    it(`${front}: an unreachable authorizer pool denies with 503 ${ErrorCodes.AUTHORIZER_FAILED}; PHP never ran`, async () => {
      const since = d.daemon.mark();
      for (let i = 0; i < 3; i++) {
        const r = await httpRequest(`${base('down')}/down/page.php`, { headers: GOOD });
        assert.equal(r.status, 503);
        assert.match(r.text, new RegExp(ErrorCodes.AUTHORIZER_FAILED));
      }
      // The first failure of the episode is logged, naming both pools and the cause.
      const warn = await d.daemon.waitForLog((l) => l.code === ErrorCodes.AUTHORIZER_FAILED && l.pool === 'down');
      assert.equal(warn.level, LogLevel.warn);
      assert.equal(warn.authorizer, 'gone');
      assert.match(String(warn.cause), /^ERR_(BACKEND_UNREACHABLE|ALL_BACKENDS_DOWN)$/);
      const lines = d.daemon.logsSince(since).filter((l) => l.code === ErrorCodes.AUTHORIZER_FAILED && l.pool === 'down' && l.repeats === undefined);
      assert.ok(lines.length < 3, `one line per episode, not one per request: ${lines.length}`);
      const now = await pools();
      assert.equal(now.down!.accepted, 0, 'the protected pool never got a request');
      assert.ok(now.down!.outcomes!.authorizer!.failed >= 1);
    });

    it(`${front}: an authorizer that crashes denies with 503; PHP never ran`, async () => {
      const r = await httpRequest(`${base('crash')}/crash/page.php`, { headers: GOOD });
      assert.equal(r.status, 503);
      assert.match(r.text, new RegExp(ErrorCodes.AUTHORIZER_FAILED));
      const now = await pools();
      assert.equal(now.crash!.accepted, 0);
      assert.ok(now.crasher!.accepted >= 1, 'the authorizer was asked');
    });
  }

  it('authorizer_cache: a kept grant spares the authorizer for the same credentials and first path segment, not for others', async () => {
    const ask = async (uri: string, authorization: string): Promise<number> => (await httpRequest(`${http.cached}${uri}`, { headers: { authorization } })).status;
    const before = await pools();
    assert.equal(await ask('/cached/page.php', 'Bearer good'), 200);
    assert.equal(await ask('/cached/page.php?again', 'Bearer good'), 200);
    assert.equal((await pools()).auth!.accepted, before.auth!.accepted + 1, 'the second request was granted from the cache');
    // Through nginx the same key: still kept.
    const r = await httpRequest(`${nginx.url}/cached/page.php`, { headers: GOOD });
    assert.equal(r.status, 200);
    assert.equal(JSON.parse(r.text).remote_user, 'ann', 'a kept grant adds its variables too');
    // Other credentials are asked about (and denies are not kept).
    assert.equal(await ask('/cached/page.php', 'Bearer bad'), 401);
    assert.equal(await ask('/cached/page.php', 'Bearer bad'), 401);
    const now = await pools();
    assert.equal(now.auth!.accepted, before.auth!.accepted + 3);
    const counts = now.cached!.outcomes!.authorizer!;
    assert.deepEqual(counts, { allowed: 1, cached: 2, denied: 2, failed: 0 });
    // The same counts in the other formats (src/control/fields.ts defines them once).
    const prom = await d.ctl(['status', '--prometheus']);
    for (const [decision, n] of Object.entries(counts)) {
      assert.match(prom.stdout, new RegExp(`^fcgipm_authorizer_decisions_total\\{pool="cached",decision="${decision}"\\} ${n}$`, 'm'));
    }
    const text = await d.ctl(['status', '--pool', 'cached']);
    assert.match(text.stdout, /authorizer decisions/);
    // Without a cache every request is asked about.
    const app = now.auth!.accepted;
    for (let i = 0; i < 2; i++) assert.equal((await httpRequest(`${http.app}/app/page.php`, { headers: GOOD })).status, 200);
    assert.equal((await pools()).auth!.accepted, app + 2);
  });

  it(`an authorizer past its pool's read_timeout denies with 503 ${ErrorCodes.AUTHORIZER_FAILED}`, async () => {
    const since = d.daemon.mark();
    const r = await httpRequest(`${http.slow}/slow/page.php?ms=5000`, { headers: GOOD });
    assert.equal(r.status, 503);
    assert.match(r.text, new RegExp(ErrorCodes.AUTHORIZER_FAILED));
    const warn = await d.daemon.waitForLog((l) => l.code === ErrorCodes.AUTHORIZER_FAILED && l.pool === 'slow', { since });
    assert.equal(warn.cause, ErrorCodes.BACKEND_TIMEOUT);
    assert.equal((await pools()).slow!.accepted, 0);
  });

  it('a client that leaves while its request is authorized cancels the authorizer request; the pool never gets it', async () => {
    type Counts = PoolCounts & { aborted: number; active: number };
    const hanger = async (): Promise<Counts> => (await pools()).hanger as Counts;
    const before = await hanger();
    // The authorizer sleeps far longer than the status polls below take.
    const req = http2.request(`${http.hang}/hang/page.php?ms=8000`, { headers: GOOD, agent: false });
    req.on('error', () => {});
    req.end();
    await waitFor(async () => (await hanger()).active > 0, { what: 'the authorizer running' });
    req.destroy();
    await waitFor(async () => (await hanger()).aborted > before.aborted, { what: 'the authorizer request aborted' });
    assert.equal((await pools()).hang!.accepted, 0);
  });

  it(`a grant that would set SCRIPT_FILENAME is refused: 503 ${ErrorCodes.AUTHORIZER_FAILED}, the protected pool never gets it`, async () => {
    const since = d.daemon.mark();
    const before = (await pools()).app!.accepted;
    const r = await httpRequest(`${http.app}/app/page.php`, { headers: { authorization: 'Bearer steer' } });
    assert.equal(r.status, 503);
    const warn = await d.daemon.waitForLog((l) => l.code === ErrorCodes.AUTHORIZER_FAILED && l.pool === 'app', { since });
    assert.equal(warn.cause, ErrorCodes.AUTHORIZER_ANSWER);
    assert.match(String(warn.msg), /SCRIPT_FILENAME/);
    assert.equal((await pools()).app!.accepted, before);
  });

  it('the HTTP listener asks the authorizer before it serves a static file of a guarded pool', async () => {
    const denied = await httpRequest(`${http.app}/app/secret.txt`, { headers: { authorization: 'Bearer bad' } });
    assert.equal(denied.status, 401);
    assert.match(denied.text, /^denied by auth\.php/);
    const granted = await httpRequest(`${http.app}/app/secret.txt`, { headers: GOOD });
    assert.equal(granted.status, 200);
    assert.equal(granted.text, 'a static file of a guarded pool\n');
  });

  it("vhosts: a site whose pool settings name an authorizer is guarded; another site is not", async () => {
    const locked = await httpRequest(`${sites}/page.php`, { headers: { host: 'locked.test', authorization: 'Bearer bad' } });
    assert.equal(locked.status, 401);
    const granted = await httpRequest(`${sites}/page.php`, { headers: { host: 'locked.test', ...GOOD } });
    assert.equal(granted.status, 200, granted.text);
    assert.equal(JSON.parse(granted.text).remote_user, 'ann');
    const open = await httpRequest(`${sites}/page.php`, { headers: { host: 'open.test', authorization: 'Bearer bad' } });
    assert.equal(open.status, 200, open.text);
    assert.equal(JSON.parse(open.text).remote_user, null);
  });

  // Last: it changes the config.
  it('reload: a bad authorizer is refused with its line and nothing changes; replacing the authorizer pool empties the cache', async () => {
    const ask = (): Promise<number> => httpRequest(`${http.cached}/cached/page.php`, { headers: GOOD }).then((r) => r.status);
    assert.equal(await ask(), 200); // kept since the cache test
    const kept = (await pools()).auth!.accepted;
    assert.equal(await ask(), 200);
    assert.equal((await pools()).auth!.accepted, kept, 'granted from the cache');
    const poolsOf = config.pools as Record<string, Record<string, unknown>>;
    d.rewrite({ ...config, pools: { ...poolsOf, cached: { ...poolsOf.cached, authorizer: 'cached' } } });
    const bad = await d.ctl(['reload'], 60_000);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stdout + bad.stderr, /fcgi-pm\.yaml:\d+: pools\.cached\.authorizer: names this pool itself/);
    assert.equal(await ask(), 200);
    assert.equal((await pools()).auth!.accepted, kept, 'the old config serves on, its cache too');
    // max_requests: a new generation (a max_children change alone is retuned in place and keeps the pool, and its cache).
    d.rewrite({ ...config, pools: { ...poolsOf, auth: { ...poolsOf.auth, max_requests: 1000 } } });
    const ok = await d.ctl(['reload'], 60_000);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.equal(await ask(), 200);
    // Status folds the replaced pool's counters into the name's.
    assert.equal((await pools()).auth!.accepted, kept + 1, 'the new authorizer pool was asked: the cache was emptied with the old one');
  });
});
