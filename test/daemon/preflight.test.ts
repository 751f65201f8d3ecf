// The host checks (src/daemon/preflight.ts) against real files and the real user
// database, with the daemon's own ids given so both the root and the non-root rules run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { openSharedRunDir } from '../../src/daemon/runtime-dir.js';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { stringify as stringifyYaml } from 'yaml';
import { parseConfigText, validateConfigFile } from '../../src/config/load.js';
import { preflight, assertPreflight, type PreflightOptions } from '../../src/daemon/preflight.js';
import { ConfigError } from '../../src/errors.js';
import { lookupUser } from '../../src/config/system-users.js';
import { makeTempDir } from '../helpers/tmp.js';

const ROOT = { uid: 0, gid: 0 };
const WWW = lookupUser('www-data')!;
const NOBODY = lookupUser('nobody')!;
/** A non-root daemon: the nobody account, as if started by it. */
const AS_NOBODY = { uid: NOBODY.uid, gid: NOBODY.gid };

function check(t: TestContext, config: Record<string, unknown>, opts: PreflightOptions = { self: ROOT }) {
  const dir = makeTempDir(t, 'fpm-pf-');
  chmodSync(dir, 0o755);
  const file = join(dir, 'fcgi-pm.yaml');
  const text = stringifyYaml({ control_socket: 'off', ...config });
  writeFileSync(file, text);
  const line = (needle: string): number => text.split('\n').findIndex((l) => l.includes(needle)) + 1;
  return { ...preflight(parseConfigText(text, file, file), opts), file, dir, line };
}

const php = (pool: Record<string, unknown> = {}) => ({
  listen: [{ protocol: 'fastcgi', address: '127.0.0.1:0', pool: 'app' }],
  pools: { app: { command: ['php-cgi'], ...pool } },
});

test('as root, a spawned pool without user is refused with the fix, at the pool line', (t) => {
  const r = check(t, php());
  assert.equal(r.rootRefusals, 1);
  assert.deepEqual(r.problems, [`${r.file}:${r.line('  app:')}: pools.app: workers would run as root; add user: www-data (or user: root to allow it, or run with --allow-root)`]);
});

test('as root, user: root, user: 0 and --allow-root are consent; a group alone is not', (t) => {
  assert.deepEqual(check(t, php({ user: 'root' })).problems, []);
  assert.deepEqual(check(t, php({ user: 0 })).problems, []);
  assert.deepEqual(check(t, php(), { self: ROOT, allowRoot: true }).problems, []);
  assert.equal(check(t, php({ group: 'www-data' })).rootRefusals, 1);
});

test('as root, a pool with a user, or with external backends, passes', (t) => {
  const withUser = check(t, php({ user: 'www-data' }));
  assert.deepEqual([withUser.problems, withUser.notices, withUser.rootRefusals], [[], [], 0]);
  const external = check(t, { listen: [{ protocol: 'fastcgi', address: '127.0.0.1:0', pool: 'ext' }], pools: { ext: { backends: ['127.0.0.1:9'] } } });
  assert.deepEqual([external.problems, external.notices], [[], []]);
});

test('not root: user naming someone else is ignored with a notice; naming ourselves is silent', (t) => {
  const other = check(t, php({ user: 'www-data' }), { self: AS_NOBODY });
  assert.deepEqual(other.problems, []);
  assert.equal(other.notices.length, 1);
  assert.match(other.notices[0]!, new RegExp(`^${other.file}:${other.line('  app:')}: pools\\.app: user/group ignored: fcgi-pm is not running as root, so workers run as uid ${NOBODY.uid}`));
  const self = check(t, php({ user: 'nobody', group: 'nogroup' }), { self: AS_NOBODY });
  assert.deepEqual([self.problems, self.notices], [[], []]);
  // Not root, no user: the workers run as the daemon's user; nothing to refuse.
  assert.deepEqual(check(t, php(), { self: AS_NOBODY }).problems, []);
});

test('user and group must exist, by name or numeric id', (t) => {
  const r = check(t, php({ user: 'nosuchuser' }));
  assert.match(r.problems.join('\n'), new RegExp(`:${r.line('user:')}: pools\\.app\\.user: no such user "nosuchuser"`));
  const g = check(t, php({ user: 'www-data', group: 'nosuchgroup' }));
  assert.match(g.problems.join('\n'), new RegExp(`:${g.line('group:')}: pools\\.app\\.group: no such group "nosuchgroup"`));
  assert.match(check(t, php({ user: 987654 })).problems.join('\n'), /pools\.app\.user: no such user "987654"/);
  assert.deepEqual(check(t, php({ user: WWW.uid, group: WWW.gid })).problems, []);
  // Not root the user must still exist: a typo is a typo.
  assert.match(check(t, php({ user: 'nosuchuser' }), { self: AS_NOBODY }).problems.join('\n'), /no such user/);
});

test('cwd must be a directory the workers can enter', (t) => {
  const missing = check(t, php({ user: 'www-data', cwd: '/nonexistent' }));
  assert.deepEqual(missing.problems, [`${missing.file}:${missing.line('cwd:')}: pools.app.cwd: /nonexistent: no such directory (ENOENT)`]);
  const c = check(t, php({ user: 'www-data' }));
  writeFileSync(join(c.dir, 'plain'), '');
  assert.match(check(t, php({ user: 'www-data', cwd: join(c.dir, 'plain') })).problems.join('\n'), /pools\.app\.cwd: .*plain is not a directory \(ENOTDIR\)/);
  const closed = join(c.dir, 'closed');
  mkdirSync(closed, { mode: 0o700 });
  assert.match(check(t, php({ user: 'www-data', cwd: closed })).problems.join('\n'), new RegExp(`pools\\.app\\.cwd: the workers' user \\(uid ${WWW.uid}\\) cannot enter ${closed} \\(mode 0700`));
});

test('the command must resolve on the workers\' PATH and be executable by them', (t) => {
  const r = check(t, php({ user: 'www-data', command: ['no-such-program-x'] }));
  assert.match(r.problems.join('\n'), new RegExp(`:${r.line('command:')}: pools\\.app\\.command: cannot execute "no-such-program-x": ENOENT \\(not found in PATH=`));
  // The workers' PATH, not ours: env PATH without /usr/bin hides php-cgi.
  assert.match(check(t, php({ user: 'www-data', env: { PATH: '/nowhere' } })).problems.join('\n'), /cannot execute "php-cgi": ENOENT \(not found in PATH=\/nowhere\)/);
  // "./x" is relative to the config file's directory.
  const c = check(t, php({ user: 'www-data', command: ['./app'] }));
  assert.match(c.problems.join('\n'), new RegExp(`cannot execute ${c.dir}/app: ENOENT`));
  const closed = join(c.dir, 'closed');
  mkdirSync(closed, { mode: 0o700 });
  writeFileSync(join(closed, 'app'), '#!/bin/sh\n', { mode: 0o755 });
  assert.match(check(t, php({ user: 'www-data', command: [join(closed, 'app')] })).problems.join('\n'), /pools\.app\.command: .*the workers' user \(uid 33\) cannot enter .*closed/);
  assert.deepEqual(check(t, php({ user: 'root', command: [join(closed, 'app')] })).problems, [], 'root may enter it');
});

test('a script named in the command must be readable by the workers', (t) => {
  const c = check(t, php({ user: 'nobody' }));
  const open = join(c.dir, 'app.mjs');
  writeFileSync(open, '', { mode: 0o644 });
  assert.deepEqual(check(t, php({ user: 'nobody', command: ['node', open] })).problems, []);
  const secret = join(c.dir, 'secret.mjs');
  writeFileSync(secret, '', { mode: 0o600 });
  const r = check(t, php({ user: 'nobody', command: ['node', secret] }));
  assert.match(r.problems.join('\n'), new RegExp(`pools\\.app\\.command\\[1\\]: the workers' user \\(uid ${NOBODY.uid}\\) cannot read ${secret} \\(mode 0600`));
});

test("a spawned pool's script must be a regular file its workers can read", (t) => {
  const c = check(t, php({ user: 'nobody' }));
  const open = join(c.dir, 'auth.php');
  writeFileSync(open, '<?php', { mode: 0o644 });
  assert.deepEqual(check(t, php({ user: 'nobody', script: open })).problems, []);
  const missing = check(t, php({ user: 'nobody', script: join(c.dir, 'nothing.php') }));
  assert.deepEqual(missing.problems, [`${missing.file}:${missing.line('script:')}: pools.app.script: ${join(c.dir, 'nothing.php')} is not a regular file (every request of this pool runs it)`]);
  const secret = join(c.dir, 'secret.php');
  writeFileSync(secret, '<?php', { mode: 0o600 });
  const r = check(t, php({ user: 'nobody', script: secret }));
  assert.match(r.problems.join('\n'), new RegExp(`pools\\.app\\.script: the workers' user \\(uid ${NOBODY.uid}\\) cannot read ${secret} \\(mode 0600`));
});

test('unix listener directories must exist and take files; runtime_dir may be created', (t) => {
  const r = check(t, { ...php({ user: 'www-data' }), listen: [{ protocol: 'fastcgi', address: 'unix:/nonexistent-dir/app.sock', pool: 'app' }] });
  assert.deepEqual(r.problems, [`${r.file}:${r.line('address:')}: listen[0].address: cannot create unix:/nonexistent-dir/app.sock: /nonexistent-dir: no such directory (ENOENT)`]);
  const inRuntime = check(t, { ...php({ user: 'www-data' }), runtime_dir: '/tmp/fpm-pf-missing/run', listen: [{ protocol: 'fastcgi', address: 'unix:/tmp/fpm-pf-missing/run/app.sock', pool: 'app' }] });
  assert.deepEqual(inRuntime.problems, [], 'fcgi-pm creates runtime_dir itself');
  const notRoot = check(t, { ...php(), listen: [{ protocol: 'fastcgi', address: 'unix:/etc/app.sock', pool: 'app' }] }, { self: AS_NOBODY });
  assert.deepEqual(notRoot.problems.map((p) => p.replace(/^[^ ]+ /, '')), [`listen[0].address: cannot create unix:/etc/app.sock: fcgi-pm (uid ${NOBODY.uid}) cannot write in /etc (mode 0755, owner uid 0 gid 0) (EACCES)`]);
});

test('a configured control socket, log files and document_root are checked too', (t) => {
  const logs = check(t, { ...php({ user: 'www-data' }), log: { file: '/etc/passwd/fcgi-pm.log', access_file: '/tmp/fpm-pf-new/access.log' } });
  assert.deepEqual(logs.problems.map((p) => p.replace(/^[^ ]+ /, '')), ['log.file: cannot create /etc/passwd/fcgi-pm.log: /etc/passwd is not a directory (ENOTDIR)']);
  const ctl = check(t, { ...php({ user: 'www-data' }), control_socket: '/etc/passwd/x/control.sock' });
  assert.match(ctl.problems.join('\n'), /control_socket: cannot create \/etc\/passwd\/x\/control\.sock: \/etc\/passwd is not a directory \(ENOTDIR\)/);
  const docroot = check(t, { ...php({ user: 'www-data' }), listen: [{ protocol: 'http', address: '127.0.0.1:0', pool: 'app', document_root: '/nonexistent-root' }] });
  assert.match(docroot.problems.join('\n'), /listen\[0\]\.document_root: \/nonexistent-root: no such directory \(ENOENT\)/);
});

test("opcache_dir: fcgi-pm must be able to make it and each php-cgi pool's user to pass through it", (t) => {
  const notDir = check(t, { ...php({ user: 'www-data' }), opcache_dir: '/etc/passwd/opcache' });
  assert.deepEqual(notDir.problems, [`${notDir.file}:${notDir.line('opcache_dir:')}: opcache_dir: cannot make the opcache file cache root /etc/passwd/opcache: /etc/passwd is not a directory (ENOTDIR)`]);
  // Root's 0700 directory: fcgi-pm can make the pool's directory there, www-data cannot reach it.
  const closed = join(makeTempDir(t, 'fpm-pf-oc-'), 'cache');
  const shut = check(t, { ...php({ user: 'www-data' }), opcache_dir: closed });
  assert.equal(shut.problems.length, 1);
  assert.match(shut.problems[0]!, new RegExp(`pools\\.app\\.opcache_file_cache: the workers' user \\(uid ${WWW.uid}\\) cannot enter /tmp/fpm-pf-oc-\\w+ \\(mode 0700, owner uid 0 gid 0\\), so it cannot reach its opcache file cache under ${closed}`));
  // Not a php-cgi pool, the file cache off, or set by the pool itself: nothing to check.
  assert.deepEqual(check(t, { ...php({ user: 'www-data', opcache_file_cache: false }), opcache_dir: closed }).problems, []);
  assert.deepEqual(check(t, { ...php({ user: 'www-data', command: ['php-cgi', '-d', 'opcache.file_cache=/tmp'] }), opcache_dir: closed }).problems, []);
  assert.deepEqual(check(t, { ...php({ user: 'www-data', command: ['/bin/cat'] }), opcache_dir: closed }).problems, []);
  // The root's own pools pass; so does the default (as root /var/cache/fcgi-pm/…, else the private runtime directory).
  assert.deepEqual(check(t, { ...php({ user: 'root' }), opcache_dir: closed }).problems, []);
  assert.deepEqual(check(t, php({ user: 'www-data' })).problems, []);
  assert.deepEqual(check(t, php(), { self: AS_NOBODY }).problems, []);
});

test('assertPreflight: notices out, problems as one ConfigError with a code for root refusals', (t) => {
  const c = check(t, php());
  const cfg = parseConfigText(stringifyYaml({ control_socket: 'off', ...php() }), c.file, c.file);
  assert.throws(() => assertPreflight(cfg, { self: ROOT }, () => undefined), (e: unknown) => e instanceof ConfigError && e.code === 'ERR_ROOT_WORKERS' && e.problems.length === 1);
  const bad = parseConfigText(stringifyYaml({ control_socket: 'off', ...php({ user: 'www-data', cwd: '/nonexistent' }) }), c.file, c.file);
  assert.throws(() => assertPreflight(bad, { self: ROOT }, () => undefined), (e: unknown) => e instanceof ConfigError && e.code === 'ERR_HOST_CHECK');
  const notices: string[] = [];
  const ignored = parseConfigText(stringifyYaml({ control_socket: 'off', ...php({ user: 'www-data' }) }), c.file, c.file);
  assertPreflight(ignored, { self: AS_NOBODY }, (n) => notices.push(n));
  assert.equal(notices.length, 1);
});

test('max_children above pid_max, and a static pool beyond its memory_limit or the host, are named at max_children', (t) => {
  const host = { pidMax: 1000, memTotal: 4 * 1024 ** 3, installed: () => false };
  const cfg = load(t, {
    control_socket: 'off',
    listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'many' }],
    pools: {
      many: { command: ['php-cgi'], user: 'www-data', max_children: 1001 },
      fits: { command: ['php-cgi'], user: 'www-data', max_children: 1000, pm: 'static', expected_worker_memory: '4MiB' },
      limited: { command: ['php-cgi'], user: 'www-data', pm: 'static', max_children: 10, memory_limit: '256MiB' },
      host: { command: ['php-cgi'], user: 'www-data', pm: 'static', max_children: 200 },
      ondemand: { command: ['php-cgi'], user: 'www-data', max_children: 200 },
    },
  });
  const r = preflight(cfg, { self: ROOT, host });
  assert.deepEqual(r.problems.map((p) => p.replace(/^[^:]*:\d+: /, '')), [
    "pools.many.max_children: 1001 is above this host's pid_max (1000, /proc/sys/kernel/pid_max): that many processes cannot exist",
    'pools.limited.max_children: pm static starts all 10 workers at once: at expected_worker_memory (32MiB) each that is 320MiB, more than its memory_limit (256MiB); lower max_children or use pm: dynamic or ondemand',
    "pools.host.max_children: pm static starts all 200 workers at once: at expected_worker_memory (32MiB) each that is 6400MiB, more than this host's memory (MemTotal) (4GiB); lower max_children or use pm: dynamic or ondemand",
  ]);
});

test('a Unix socket the front end cannot reach: a problem for check when the config names it, a notice otherwise', (t) => {
  const closed = makeTempDir(t, 'fpm-reach-');
  chmodSync(closed, 0o700);
  const open = makeTempDir(t, 'fpm-reach-');
  chmodSync(open, 0o755);
  const www = lookupUser('www-data')!;
  const cfg = load(t, {
    control_socket: 'off',
    listen: [
      { protocol: 'fastcgi', address: `unix:${closed}/named.sock`, pool: 'app', group: 'www-data', mode: '0660' },
      { protocol: 'fastcgi', address: `unix:${closed}/guessed.sock`, pool: 'app' },
      { protocol: 'fastcgi', address: `unix:${open}/closed-mode.sock`, pool: 'app', group: 'www-data', mode: '0600' },
      { protocol: 'fastcgi', address: `unix:${open}/fine.sock`, pool: 'app', group: 'www-data', mode: '0660' },
    ],
    pools: { app: { backends: ['127.0.0.1:9'] } },
  });
  const host = { installed: (f: string) => f === '/usr/sbin/nginx' };
  const strict = preflight(cfg, { self: ROOT, host, strict: true });
  assert.deepEqual(strict.problems.map((p) => p.replace(/^[^:]*:\d+: /, '')), [
    `listen[0].address: group www-data cannot pass through ${closed} (mode 0700, owner uid 0 gid 0) to reach the socket: put it in a directory others may enter (chmod o+x, or a group the front end is in)`,
    `listen[2].address: group www-data cannot connect: the socket will be uid 0 gid ${www.gid} mode 0600; give it the front end's group and mode "0660" (group: www-data), or mode "0666"`,
  ]);
  assert.deepEqual(strict.notices.map((p) => p.replace(/^[^:]*:\d+: /, '')), [
    `listen[1].address: nginx's user www-data cannot pass through ${closed} (mode 0700, owner uid 0 gid 0) to reach the socket: put it in a directory others may enter (chmod o+x, or a group the front end is in)`,
  ]);
  // At start and reload the daemon serves, and says so.
  const atStart = preflight(cfg, { self: ROOT, host });
  assert.deepEqual(atStart.problems, []);
  assert.equal(atStart.notices.length, 3);
});

test('pools with a schema problem are still host-checked for their other keys', (t) => {
  const dir = makeTempDir(t, 'fpm-pf-');
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, stringifyYaml({
    control_socket: 'off',
    listen: [{ protocol: 'fastcgi', address: '127.0.0.1:9000', pool: 'app' }],
    pools: { app: { command: ['php-cgi'], user: 'nosuchuser', cwd: '/nonexistent', max_childs: 3 } },
  }));
  const v = validateConfigFile(file);
  assert.equal(v.config, undefined);
  assert.deepEqual([...(v.brokenKeys?.get('app') ?? [])], ['max_childs']);
  const r = preflight(v.valid!, { self: ROOT, brokenKeys: v.brokenKeys }, v.problems);
  const texts = r.problems.map((p) => p.replace(/^[^:]*:\d+: /, ''));
  assert.equal(texts.length, 3, texts.join('\n'));
  assert.match(texts[0]!, /^pools\.app\.user: no such user "nosuchuser"/);
  assert.equal(texts[1], 'pools.app.cwd: /nonexistent: no such directory (ENOENT)');
  assert.equal(texts[2], 'pools.app.max_childs: unknown key (did you mean "max_children"?)');
  assert.equal(r.rootRefusals, 0);
});

function load(t: TestContext, config: Record<string, unknown>) {
  const dir = makeTempDir(t, 'fpm-pf-');
  chmodSync(dir, 0o755);
  const file = join(dir, 'fcgi-pm.yaml');
  const text = stringifyYaml(config);
  writeFileSync(file, text);
  return parseConfigText(text, file, file);
}

test('/run/fcgi-pm as root made it 0700 is opened to 0755; its private directories stay 0700', (t) => {
  const base = join(makeTempDir(t, 'fpm-run-'), 'fcgi-pm');
  mkdirSync(base, { mode: 0o700 });
  chmodSync(base, 0o700);
  openSharedRunDir(base);
  assert.equal(statSync(base).mode & 0o777, 0o755);
  const fresh = join(base, 'made');
  openSharedRunDir(fresh);
  assert.equal(statSync(fresh).mode & 0o055, 0o055);
});
