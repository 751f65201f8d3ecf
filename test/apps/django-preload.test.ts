/**
 * The Django example with `preload: true` (bin/fcgi-pm-wsgi --preload): one parent
 * imports Django once and forks each worker. Behind nginx over FastCGI and SCGI, run
 * from a copy of examples/django so a test can change its code and reload.
 * Parents and children come from /proc (PPid), not from fcgi-pm's bookkeeping.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, LogLevel, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { freePort } from '../helpers/ports.js';
import { isAlive, listProcesses } from '../helpers/proc.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { exampleConfig, migrateDjango, WORKLOAD_COUNTS } from './examples.js';
import { startNginxSite, type FrontEnd } from './servers.js';
import { EXAMPLES, exampleFile } from './templates.js';

const ADAPTER = 'fcgi-pm-wsgi';
/** In the max_memory pool's command line only (an extra sys.path entry, harmless). */
const MEM_MARK = '/tmp/fcgi-pm-mem-pool';

describe('Django example with preload: true (one parent, forked workers) behind nginx', { timeout: 180_000 }, () => {
  const scope = new Cleanup();
  let daemon: Daemon;
  let app: string;
  const fronts: Record<'fastcgi' | 'scgi' | 'mem', FrontEnd> = {} as never;

  /** A pool's adapter processes: parents (children of the daemon) and their forks (pid → parent). */
  const tree = (pool: 'fastcgi' | 'scgi'): { parents: number[]; forks: Map<number, number> } => {
    const mine = (cmd: string): boolean => cmd.includes(`--${pool}`) && !cmd.includes(MEM_MARK);
    const procs = listProcesses().filter((p) => p.state !== 'Z' && p.cmdline.includes(ADAPTER) && mine(p.cmdline));
    const parents = procs.filter((p) => p.ppid === daemon.pid).map((p) => p.pid);
    const forks = new Map(procs.filter((p) => parents.includes(p.ppid)).map((p) => [p.pid, p.ppid]));
    return { parents, forks };
  };

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-djp-');
    app = join(dir, 'django');
    cpSync(join(EXAMPLES, 'django'), app, { recursive: true, filter: (src) => !src.endsWith('.sqlite3') && !src.includes('__pycache__') });
    const db = join(dir, 'db.sqlite3');
    migrateDjango(db);
    const [fcgiPort, scgiPort, memPort, web1, web2, web3] = await Promise.all(Array.from({ length: 6 }, () => freePort()));
    const adapter = join(EXAMPLES, '..', 'bin', 'fcgi-pm-wsgi');
    const preload = (proto: string) => ({
      preload: true,
      command: ['/usr/bin/python3', adapter, '--preload', proto, 'mysite.wsgi:application'],
      cwd: app,
      idle_timeout: '30s',
      env: { DJANGO_DB_PATH: db },
    });
    const cfg = exampleConfig('django/fcgi-pm.yaml', {
      listen: { '127.0.0.1:9001': `127.0.0.1:${fcgiPort}`, '127.0.0.1:9002': `127.0.0.1:${scgiPort}` },
      pools: { django: preload('--fastcgi'), 'django-scgi': preload('--scgi') },
    });
    // A third pool with a max_memory every worker is over once it has served.
    const memCommand = preload('--fastcgi').command;
    memCommand.splice(3, 0, '--path', MEM_MARK);
    cfg.pools['django-mem'] = { ...cfg.pools.django, max_memory: '1M', memory_sample_interval: '100ms', command: memCommand };
    cfg.listen.push({ protocol: 'fastcgi', address: `127.0.0.1:${memPort}`, pool: 'django-mem' });
    daemon = await startDaemon(scope, cfg);
    const site = (conf: string, from: string, port: number, web: number): Promise<FrontEnd> =>
      startNginxSite(scope, exampleFile(conf, [['listen 127.0.0.1:8080', `listen 127.0.0.1:${web}`], [from, `127.0.0.1:${port}`]]), web);
    fronts.fastcgi = await site('django/nginx-fastcgi.conf', '127.0.0.1:9001', fcgiPort, web1);
    fronts.scgi = await site('django/nginx-scgi.conf', '127.0.0.1:9002', scgiPort, web2);
    fronts.mem = await site('django/nginx-fastcgi.conf', '127.0.0.1:9001', memPort, web3);
  });
  after(() => scope.run());

  for (const [name, key] of [['FastCGI', 'fastcgi'], ['SCGI', 'scgi']] as const) {
    it(`${name}: the 8,750-byte and SQLite pages, served by forks of one parent`, async () => {
      const url = (p: string): string => `${fronts[key].url}/app${p}`;
      const page = await httpRequest(url('/page/'));
      assert.equal(page.status, 200, page.text.slice(0, 300));
      assert.equal(page.body.length, 8750);
      assert.match(page.text, /<h1>A page of 8,750 bytes<\/h1>/);
      // Four at once: several workers, all forked from the same parent.
      const dbs = await Promise.all(Array.from({ length: 4 }, () => httpRequest(url('/db/'))));
      for (const r of dbs) {
        assert.equal(r.status, 200, r.text.slice(0, 300));
        assert.deepEqual(JSON.parse(r.text), WORKLOAD_COUNTS);
      }
      const { parents, forks } = tree(key);
      assert.ok(parents.length >= 1, 'a preload parent under the daemon');
      assert.ok(forks.size >= 1, 'forked workers (a worker retired after each SCGI request leaves none)');
      const ppids = new Set(forks.values());
      assert.equal(ppids.size, 1, `every worker has the same parent: ${JSON.stringify([...forks])}`);
      assert.ok(readFileSync(`/proc/${[...ppids][0]}/cmdline`, 'latin1').includes('--preload'));
    });
  }

  it('killing one forked worker leaves the others serving', async () => {
    const url = `${fronts.fastcgi.url}/app/db/`;
    await Promise.all(Array.from({ length: 4 }, () => httpRequest(url)));
    const before = tree('fastcgi').forks;
    assert.ok(before.size >= 2, `at least two workers (${before.size})`);
    const [victim, parent] = [...before][0]!;
    process.kill(victim, 'SIGKILL');
    await waitFor(() => !isAlive(victim), { timeout: 5000, what: 'the killed worker to go' });
    const rs = await Promise.all(Array.from({ length: 8 }, () => httpRequest(url)));
    for (const r of rs) assert.equal(r.status, 200, r.text.slice(0, 200));
    const after = tree('fastcgi').forks;
    assert.ok(!after.has(victim));
    for (const [pid, pp] of after) assert.equal(pp, parent, `worker ${pid} is a fork of ${parent}`);
    for (const [pid] of before) if (pid !== victim) assert.ok(after.has(pid), `worker ${pid} lives on`);
  });

  it('max_memory recycles one forked worker; the parent forks the next one', async () => {
    const url = `${fronts.mem.url}/app/page/`;
    const ofPool = (l: Record<string, unknown>): boolean => l['pool'] === 'django-mem';
    const since = daemon.mark();
    assert.equal((await httpRequest(url)).status, 200);
    const ready = (after: number, not?: number) =>
      daemon.waitForLog((l) => ofPool(l) && /^worker \d+ ready after/.test(String(l.msg)) && l.wpid !== not, { since: after, timeout: 10_000, what: 'a worker ready line' });
    const first = Number((await ready(since)).wpid);
    // Its parent from the log: the worker may be recycled (and gone from /proc) as soon as it served.
    const parent = Number((await daemon.waitForLog((l) => ofPool(l) && /^preload parent \d+ ready/.test(String(l.msg)), { what: 'the preload parent' })).wpid);
    const line = await daemon.waitForLog((l) => l.wpid === first && /over max_memory/.test(String(l.msg)), { since, timeout: 10_000, what: 'the max_memory line' });
    assert.match(String(line.msg), /recycling it/);
    await waitFor(() => !isAlive(first), { timeout: 10_000, what: 'the recycled worker to exit' });
    assert.ok(isAlive(parent), 'its parent lives on');
    const again = daemon.mark();
    assert.equal((await httpRequest(url)).status, 200);
    const next = Number((await ready(again, first)).wpid);
    assert.notEqual(next, first);
    // Forked by the same parent: no new parent was started for this pool.
    assert.equal(daemon.logsSince(since).filter((l) => ofPool(l) && /^preload parent \d+ starting/.test(String(l.msg))).length, 0);
    assert.ok(isAlive(parent));
  });

  it('a code change + reload under load: a new parent imports it, no request fails, the old workers drain', async () => {
    const url = `${fronts.fastcgi.url}/app/caf%C3%A9/`;
    const oldParents = tree('fastcgi').parents;
    const views = join(app, 'pages', 'views.py');
    writeFileSync(views, readFileSync(views, 'utf8').replace("'café ☕\\n'", "'café ☕ v2\\n'"));
    const bodies: string[] = [];
    const failures: string[] = [];
    let stop = false;
    const lane = async (): Promise<void> => {
      while (!stop) {
        const r = await httpRequest(url);
        if (r.status !== 200) failures.push(`${r.status} ${r.text.slice(0, 200)}`);
        bodies.push(r.text);
      }
    };
    const lanes = Array.from({ length: 4 }, lane);
    await waitFor(() => bodies.length >= 20, { timeout: 10_000, what: 'load before the reload' });
    const since = daemon.mark();
    daemon.signal('SIGHUP');
    await waitFor(() => bodies.slice(-10).length === 10 && bodies.slice(-10).every((b) => b === 'café ☕ v2\n'), { timeout: 30_000, what: 'the new code to answer' });
    await daemon.waitForLog((l) => /pool django stopped/.test(String(l.msg)), { since, timeout: 30_000, what: 'the old pool to stop' });
    stop = true;
    await Promise.all(lanes);
    assert.deepEqual(failures, []);
    assert.ok(bodies.includes('café ☕\n'), 'the old code answered before the reload');
    const now = tree('fastcgi');
    for (const p of oldParents) assert.ok(!now.parents.includes(p), `old parent ${p} stopped`);
    assert.equal(now.parents.length, 1);
  });

  it('logged no errors; Django wrote no traceback', (t) => {
    const errors = daemon.logs.filter((l) => typeof l.level === 'number' && l.level >= LogLevel.error);
    for (const e of errors.slice(0, 5)) t.diagnostic(JSON.stringify(e).slice(0, 300));
    assert.equal(errors.length, 0);
    assert.doesNotMatch(JSON.stringify(daemon.logs), /Traceback/);
  });
});
