/**
 * The packages as a new user gets them, built once per run: the npm tarball (what `npm
 * pack` ships) installed with `npm install -g` into an empty prefix serves the demo, and
 * the .deb (scripts/build-deb.sh from that tarball) installed with dpkg serves a PHP page
 * through nginx from the installed files, its units pass `systemd-analyze verify`, its
 * conffile passes `fcgi-pm check` as shipped, the addon it carries (built for this
 * architecture, owned by dpkg) runs an accept: direct pool on the direct path, and
 * `dpkg --purge` leaves no file.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ManagedChild } from '../helpers/child.js';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { worldReadableDir } from '../helpers/world-readable.js';
import { canConnect, waitFor } from '../helpers/wait.js';

const run = promisify(execFile);
const have = (cmd: string): boolean => ['/usr/bin', '/bin', '/usr/sbin', '/sbin'].some((d) => existsSync(join(d, cmd)));

describe('packages', { timeout: 420_000 }, () => {
  const scope = new Cleanup();
  let work: string;
  let tarball: string;
  let deb: string;

  before(async () => {
    work = makeTempDir(scope, 'fpm-pkg-');
    // dist/ is built by the test run itself (npm test compiles first): pack it as it is.
    await run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', work], { cwd: REPO_ROOT });
    tarball = join(work, readdirSync(work).find((f) => f.endsWith('.tgz'))!);
    deb = (await run('sh', [join(REPO_ROOT, 'scripts/build-deb.sh'), '--tarball', tarball, '--out', work])).stdout.trim();
  });
  after(() => scope.run());

  it('the tarball ships dist, bin, examples, docs, README, LICENSE and CHANGELOG, nothing of test/ or bench/', async () => {
    const files = (await run('tar', ['-tzf', tarball])).stdout.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''));
    for (const f of ['bin/fcgi-pm', 'bin/fcgi-pm-wsgi', 'dist/src/cli/main.js', 'examples/demo/fcgi-pm.yaml', 'docs/operations.md', 'README.md', 'LICENSE', 'CHANGELOG.md', 'node_modules/pino/package.json']) {
      assert.ok(files.includes(f), `${f} missing from the tarball`);
    }
    assert.deepEqual(files.filter((f) => /^(test|bench|dist\/test|dist\/bench)\//.test(f)), []);
  });

  it('npm install -g of the tarball into an empty prefix: fcgi-pm and fcgi-pm-wsgi answer, and it serves the demo', async (t) => {
    const prefix = worldReadableDir(t, makeTempDir(t, 'fpm-prefix-'));
    // Everything it needs is in the tarball: no registry, no compiler.
    await run('npm', ['install', '-g', '--prefix', prefix, '--offline', '--omit=optional', '--no-audit', '--no-fund', tarball], { env: { ...process.env, npm_config_cache: join(prefix, '.npm') } });
    const bin = join(prefix, 'bin');
    assert.match((await run(join(bin, 'fcgi-pm'), ['--version'])).stdout, /^\d+\.\d+\.\d+/);
    assert.match((await run(join(bin, 'fcgi-pm-wsgi'), ['--help'])).stdout, /WSGI/);
    const pkg = join(prefix, 'lib', 'node_modules', 'fcgi-pm');
    const cfg = parseYaml(readFileSync(join(pkg, 'examples/demo/fcgi-pm.yaml'), 'utf8')) as { listen: Array<{ address: string }> };
    const port = await freePort();
    cfg.listen = [{ ...cfg.listen[0]!, address: `127.0.0.1:${port}` }];
    const file = join(prefix, 'demo.yaml');
    writeFileSync(file, stringifyYaml({ ...cfg, control_socket: 'off' }));
    const demo = new ManagedChild('demo', join(bin, 'fcgi-pm'), ['run', '-c', file], { cwd: pkg, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    t.after(() => demo.stop(10_000));
    await waitFor(async () => {
      if (!demo.running) throw new Error(`exited: ${demo.stderr}`);
      return canConnect({ port });
    }, { timeout: 20_000, what: 'the demo' });
    const r = await httpRequest(`http://127.0.0.1:${port}/`, { timeout: 15_000 });
    assert.equal(r.status, 200, r.text);
  });

  it('lintian finds no error in the .deb', { skip: !have('lintian') }, async () => {
    const out = await run('lintian', [deb]).then((r) => r.stdout, (err: { stdout: string }) => err.stdout);
    assert.deepEqual(out.split('\n').filter((l) => l.startsWith('E:')), [], out);
  });

  it('dpkg -i: serves PHP through nginx from the installed files, units verify, conffile passes check; purge leaves nothing', { skip: process.getuid?.() !== 0 }, async (t) => {
    // One dpkg at a time on this machine (parallel runs of this test).
    const lock = await holdLock('/tmp/fcgi-pm-package-test.lock');
    t.after(() => lock.stdin?.end());
    const files = (await run('dpkg-deb', ['-c', deb])).stdout.split('\n').map((l) => l.split(/\s+/).slice(5).join(' ').replace(/^\./, '').replace(/ -> .*$/, '')).filter((p) => p !== '' && p !== '/');
    await run('dpkg', ['-i', deb]);
    t.after(async () => {
      await run('dpkg', ['--purge', 'fcgi-pm']).catch(() => undefined);
    });
    // Without systemd, postinst starts the packaged config through the init script where
    // invoke-rc.d knows the runlevel (not in a container or chroot): stop it, this test
    // runs its own copy (the init script has a test of its own below).
    if (!existsSync('/run/systemd/system')) await run('/etc/init.d/fcgi-pm', ['stop']);
    assert.equal((await run('/usr/bin/fcgi-pm', ['--version'])).stdout.trim(), JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version);
    const check = await run('/usr/bin/fcgi-pm', ['check', '-c', '/etc/fcgi-pm/fcgi-pm.yaml']);
    assert.match(check.stdout, /config OK/);
    if (have('systemd-analyze')) await run('systemd-analyze', ['verify', '/lib/systemd/system/fcgi-pm.socket', '/lib/systemd/system/fcgi-pm.service']);
    assert.match((await run('man', ['-w', 'fcgi-pm.yaml'])).stdout, /fcgi-pm\.yaml\.5\.gz/);
    // A page per command, and completion for bash, zsh and fish.
    assert.match((await run('man', ['-w', 'fcgi-pm-status'])).stdout, /man8\/fcgi-pm-status\.8\.gz/);
    assert.match(execGz('/usr/share/man/man8/fcgi-pm-reopen-logs.8.gz'), /EXIT STATUS[\s\S]*\n\.B 3\nNo daemon answers/);
    for (const f of ['/usr/share/bash-completion/completions/fcgi-pm', '/usr/share/zsh/vendor-completions/_fcgi-pm', '/usr/share/fish/vendor_completions.d/fcgi-pm.fish']) assert.ok(existsSync(f), f);
    assert.ok(existsSync('/usr/lib/fcgi-pm/docs/fcgi-pm.schema.json'));

    // The installed config, moved off the shared port and /run so parallel runs cannot collide.
    const dir = worldReadableDir(t, makeTempDir(t, 'fpm-deb-'));
    const cfg = parseYaml(readFileSync('/etc/fcgi-pm/fcgi-pm.yaml', 'utf8')) as Record<string, any>;
    const port = await freePort();
    cfg.listen[0].address = `127.0.0.1:${port}`;
    cfg.runtime_dir = join(dir, 'run');
    cfg.opcache_dir = join(dir, 'opcache');
    cfg.log.file = join(dir, 'fcgi-pm.log');
    cfg.log.access_file = join(dir, 'access.log');
    cfg.control_socket = join(dir, 'control.sock');
    // A direct pool beside it: the workers accept on its socket themselves, through the packaged addon.
    const overflow = await freePort();
    cfg.listen.push({ protocol: 'fastcgi', address: `127.0.0.1:${overflow}`, pool: 'direct' });
    cfg.pools.direct = { command: ['php-cgi'], user: 'www-data', accept: 'direct', direct_listen: `unix:${dir}/direct.sock`, direct_socket_mode: '0666', pm: 'static', max_children: 2 };
    const docroot = worldReadableDir(t, PHP_FIXTURES);
    const file = join(dir, 'fcgi-pm.yaml');
    writeFileSync(file, stringifyYaml(cfg));
    const daemon = new ManagedChild('fcgi-pm', '/usr/bin/fcgi-pm', ['run', '-c', file], { cwd: '/' });
    t.after(() => daemon.stop(15_000));
    await waitFor(async () => {
      if (!daemon.running) throw new Error(`exited: ${daemon.stderr}`);
      return canConnect({ port });
    }, { timeout: 20_000, what: 'the installed daemon' });
    const ngx = await startNginx(t, `root ${docroot}; location ~ \\.php$ { fastcgi_pass 127.0.0.1:${port}; ${fastcgiParams()} }`);
    const r = await httpRequest(`${ngx.url}/whoami.php`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /^uid=33 /, 'workers run as www-data, the conffile\'s user');

    const arch = (await run('dpkg', ['--print-architecture'])).stdout.trim();
    assert.equal((await run('dpkg-deb', ['-f', deb, 'Architecture'])).stdout.trim(), arch);
    assert.match((await run('dpkg', ['-S', '/usr/lib/fcgi-pm/native/build/direct-socket.node'])).stdout, /^fcgi-pm: /);
    const ngxDirect = await startNginx(t, `root ${docroot}; location ~ \\.php$ { fastcgi_pass direct; ${fastcgiParams()} }`, {
      httpExtra: `upstream direct { server unix:${dir}/direct.sock max_fails=0; server 127.0.0.1:${overflow} backup; }`,
    });
    for (let i = 0; i < 5; i++) {
      const d = await httpRequest(`${ngxDirect.url}/whoami.php`);
      assert.equal(d.status, 200, d.text);
    }
    const st = JSON.parse((await run('/usr/bin/fcgi-pm', ['status', '--json', '--control', cfg.control_socket])).stdout);
    const direct = st.pools.find((p: { name: string }) => p.name === 'direct');
    assert.equal(direct.kind, 'direct', JSON.stringify(direct));
    assert.equal(direct.directFallback, undefined);
    assert.equal(direct.completed, 0, 'served on the direct path, none through the overflow');
    assert.equal(direct.workers.length, 2);
    await daemon.stop();

    await run('dpkg', ['--purge', 'fcgi-pm']);
    const left = files.filter((p) => existsSync(p) && !isSharedDir(p));
    assert.deepEqual(left, [], 'files left after purge');
    for (const p of ['/etc/fcgi-pm', '/var/log/fcgi-pm', '/usr/lib/fcgi-pm', '/etc/systemd/system/multi-user.target.wants/fcgi-pm.service']) assert.equal(existsSync(p), false, p);
  });

  it('without systemd: the init script starts, reloads and stops the installed package; nginx as www-data reaches its Unix sockets in /run/fcgi-pm', { skip: process.getuid?.() !== 0 || existsSync('/run/systemd/system') }, async (t) => {
    const lock = await holdLock('/tmp/fcgi-pm-package-test.lock');
    t.after(() => lock.stdin?.end());
    // docs/direct.md's shape: the workers' socket and the overflow listener in /run/fcgi-pm,
    // no runtime_dir (the private directories under /run/fcgi-pm/<name>-<hash>/).
    const dir = worldReadableDir(t, makeTempDir(t, 'fpm-init-'));
    const tag = `test-${process.pid}`;
    const direct = `/run/fcgi-pm/${tag}-app.sock`;
    const overflow = `/run/fcgi-pm/${tag}-overflow.sock`;
    const file = join(dir, 'fcgi-pm.yaml');
    writeFileSync(file, stringifyYaml({
      control_socket: join(dir, 'control.sock'),
      log: { file: join(dir, 'fcgi-pm.log') },
      listen: [{ protocol: 'fastcgi', address: `unix:${overflow}`, pool: 'app', mode: '0660', group: 'www-data' }],
      pools: { app: { command: ['php-cgi'], user: 'www-data', accept: 'direct', direct_listen: `unix:${direct}`, pm: 'ondemand', max_children: 2 } },
    }));
    const pidFile = join(dir, 'fcgi-pm.pid');
    writeFileSync('/etc/default/fcgi-pm', `CONFIG=${file}\nPIDFILE=${pidFile}\nOUTPUT=${join(dir, 'fcgi-pm.out')}\n`);
    t.after(() => rmSync('/etc/default/fcgi-pm', { force: true }));
    await run('dpkg', ['-i', deb]);
    t.after(async () => {
      await run('/etc/init.d/fcgi-pm', ['stop']).catch(() => undefined);
      await run('dpkg', ['--purge', 'fcgi-pm']).catch(() => undefined);
    });
    assert.ok(readdirSync('/etc/rc2.d').some((f) => /^S\d\dfcgi-pm$/.test(f)), 'update-rc.d enabled it');
    // postinst started it (unless a policy-rc.d said no); start is idempotent.
    const started = await run('/etc/init.d/fcgi-pm', ['start']);
    assert.match(started.stdout, /Starting FastCGI process manager: fcgi-pm/);
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    assert.match(readFileSync(`/proc/${pid}/cmdline`, 'utf8'), new RegExp(`run\0-c\0${file}\0--pid-file\0${pidFile}`));
    await run('/etc/init.d/fcgi-pm', ['status']);
    assert.equal(statSync('/run/fcgi-pm').mode & 0o055, 0o055, '/run/fcgi-pm lets the front end pass');

    const docroot = worldReadableDir(t, PHP_FIXTURES);
    const ngx = await startNginx(t, `root ${docroot};
      location /overflow/ { fastcgi_pass unix:${overflow}; include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root/whoami.php; }
      location ~ \\.php$ { fastcgi_pass app; ${fastcgiParams()} }`, { user: 'www-data', httpExtra: `upstream app { server unix:${direct} max_fails=0; server unix:${overflow} backup; }` });
    for (const path of ['/whoami.php', '/overflow/x']) {
      const r = await httpRequest(`${ngx.url}${path}`);
      assert.equal(r.status, 200, `${path}: ${r.text}\n${ngx.errorLog()}`);
      assert.match(r.text, /^uid=33 /);
    }

    await run('/etc/init.d/fcgi-pm', ['reload']);
    assert.equal(Number(readFileSync(pidFile, 'utf8').trim()), pid, 'a reload keeps the pid');
    // What a package upgrade runs: the installed code in place, same pid, still serving.
    await run('/etc/init.d/fcgi-pm', ['upgrade']);
    assert.equal(Number(readFileSync(pidFile, 'utf8').trim()), pid, 'an upgrade in place keeps the pid');
    await run('/etc/init.d/fcgi-pm', ['status']);
    assert.equal((await httpRequest(`${ngx.url}/whoami.php`)).status, 200);
    await run('/etc/init.d/fcgi-pm', ['stop']);
    assert.equal(existsSync(`/proc/${pid}`), false, 'stopped');
    assert.equal(existsSync(pidFile), false, 'pid file removed');
    assert.equal(await run('/etc/init.d/fcgi-pm', ['status']).then(() => 0, (e: { code: number }) => e.code), 3);
    await run('dpkg', ['--purge', 'fcgi-pm']);
    assert.ok(!readdirSync('/etc/rc2.d').some((f) => f.endsWith('fcgi-pm')), 'purge removed the rc links');
  });
});

/** A gzipped file's text (man pages). */
function execGz(file: string): string {
  return gunzipSync(readFileSync(file)).toString('utf8');
}

/** Directories other packages own too (/usr/bin, /etc/logrotate.d ...): they stay. */
function isSharedDir(p: string): boolean {
  return !p.includes('fcgi-pm') && !p.includes('fcgi_pm');
}

/** Holds an flock(1) on `path` until the returned child's stdin is closed. */
function holdLock(path: string): Promise<ChildProcess> {
  const child = spawn('flock', ['-w', '150', path, 'sh', '-c', 'echo locked; cat >/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`flock ${path} exited ${code}`)));
  });
}
