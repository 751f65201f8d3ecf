// Issue 5 acceptance, reload: a steady stream of requests through nginx → fcgi-pm
// (FastCGI) → php-cgi workers while the config is changed and reloaded ten times with
// `fcgi-pm reload` (pool size changed, a pool added, the listener moved to it and back,
// a pool and a listener removed, one invalid config): no request fails or is refused,
// the invalid one is reported (exit 1, old config running), the workers of every
// replaced pool are gone once they drained, and a pool whose size alone changed keeps
// its workers (it is retuned in place, not replaced).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import type { TestContext } from 'node:test';
import { freePort } from '../helpers/ports.js';
import { isAlive } from '../helpers/proc.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';
import { loadThroughNginx, poolPids } from './load.js';
import { checkExposition, sampleValue } from './prom-check.js';

async function goneAfterDrain(t: TestContext, pids: number[], what: string): Promise<void> {
  void t;
  await waitFor(() => pids.every((p) => !isAlive(p)), { timeout: 20_000, what: `${what}: old workers ${pids.join(', ')} gone` });
}

test('eleven reloads under a steady load through nginx: no failed or refused request', { timeout: 120_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-rl-');
  const port = await freePort();
  const port2 = await freePort();
  const cmdA = phpCommand(dir, 'ops-reload-a');
  const cmdB = phpCommand(dir, 'ops-reload-b');
  const main = { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'a', status_path: '/fpm-status' };
  // A port someone else holds: a reload that wants to listen there must fail and change nothing.
  const squatter = net.createServer();
  await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', () => r()));
  t.after(() => new Promise<void>((r) => squatter.close(() => r())));
  const taken = (squatter.address() as net.AddressInfo).port;
  const config = (over: { a?: Record<string, unknown>; b?: Record<string, unknown> | null; mainPool?: string; extraListener?: boolean; ping?: boolean; clash?: boolean }): Record<string, unknown> => {
    const pools: Record<string, unknown> = { a: { command: cmdA, pm: 'static', max_children: 2, ...over.a } };
    if (over.b) pools.b = { command: cmdB, pm: 'ondemand', max_children: 2, ...over.b };
    const listen: Array<Record<string, unknown>> = [{ ...main, pool: over.mainPool ?? 'a', ...(over.ping ? { ping_path: '/ping' } : {}) }];
    if (over.extraListener) listen.push({ protocol: 'fastcgi', address: `127.0.0.1:${port2}`, pool: over.b ? 'b' : 'a' });
    if (over.clash) {
      pools.c = { command: cmdB, pm: 'static', max_children: 1 };
      listen.push({ protocol: 'fastcgi', address: `127.0.0.1:${taken}`, pool: 'c' });
    }
    return { listen, pools, shutdown_timeout: '20s' };
  };
  const d = await opsDaemon(t, config({}), { dir });
  const { ngx, load } = await loadThroughNginx(t, port, 4);
  await load.more(20);

  const oldA = await poolPids(d, 'a');
  assert.equal(oldA.length, 2);
  const steps: Array<{ what: string; cfg: Record<string, unknown>; replaces?: 'a' | 'b'; keeps?: 'a' | 'b'; invalid?: boolean; cannotBind?: boolean }> = [
    { what: 'a: max_children 2 → 3', cfg: config({ a: { max_children: 3 } }), keeps: 'a' },
    { what: 'pool b and a listener for it added', cfg: config({ a: { max_children: 3 }, b: {}, extraListener: true }) },
    { what: 'the main listener moves to pool b', cfg: config({ a: { max_children: 3 }, b: {}, extraListener: true, mainPool: 'b' }) },
    { what: 'invalid: b max_children 0', cfg: config({ a: { max_children: 3 }, b: { max_children: 0 }, extraListener: true, mainPool: 'b' }), invalid: true },
    { what: 'b (serving the load): max_children 2 → 3', cfg: config({ a: { max_children: 3 }, b: { max_children: 3 }, extraListener: true, mainPool: 'b' }), keeps: 'b' },
    { what: 'the main listener moves back to a', cfg: config({ a: { max_children: 3 }, b: { max_children: 3 }, extraListener: true }) },
    { what: 'pool b and its listener removed', cfg: config({ a: { max_children: 3 } }), replaces: 'b' },
    { what: 'a: pm static → dynamic', cfg: config({ a: { pm: 'dynamic', max_children: 3 } }), replaces: 'a' },
    { what: 'ping_path added to the main listener', cfg: config({ a: { pm: 'dynamic', max_children: 3 }, ping: true }) },
    { what: 'a new pool c behind a listener whose port is taken', cfg: config({ a: { pm: 'dynamic', max_children: 3 }, ping: true, clash: true }), cannotBind: true },
    { what: 'a: max_requests 500 under load', cfg: config({ a: { pm: 'dynamic', max_children: 3, max_requests: 500 }, ping: true }), replaces: 'a' },
  ];
  for (const [i, step] of steps.entries()) {
    const before = step.replaces ? await poolPids(d, step.replaces) : [];
    const kept = step.keeps ? await poolPids(d, step.keeps) : [];
    // Pool a is static and unchanged from step 2 to 7: the same workers must serve on.
    const keptA = i >= 1 && i <= 6 ? await poolPids(d, 'a') : undefined;
    d.rewrite(step.cfg);
    const r = await d.ctl(['reload'], 60_000);
    if (step.cannotBind) {
      assert.equal(r.code, 1, `${step.what}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${taken}: already in use`));
      const st = JSON.parse((await d.ctl(['status', '--json'])).stdout);
      assert.deepEqual(st.pools.map((p: { name: string }) => p.name), ['a'], 'pool c was started and stopped again');
    } else if (step.invalid) {
      assert.equal(r.code, 1, `${step.what}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /pools\.b\.max_children: must be a whole number ≥ 1, got 0/);
      assert.match(r.stderr, /keeps its previous config/);
      await d.daemon.waitForLog((l) => l.kind === 'reload' && l.ok === false, { what: 'the failed reload logged' });
    } else {
      assert.equal(r.code, 0, `reload ${i + 1} (${step.what}): ${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /^reloaded/);
    }
    await load.more(20);
    assert.deepEqual(load.failures, [], `after reload ${i + 1} (${step.what})`);
    if (keptA !== undefined) assert.deepEqual(await poolPids(d, 'a'), keptA, `${step.what}: pool a kept its workers`);
    if (step.keeps) {
      assert.match(r.stdout, new RegExp(`pools retuned in place \\(workers kept\\): ${step.keeps}\\b`), r.stdout);
      const now = await poolPids(d, step.keeps);
      for (const p of kept) assert.ok(now.includes(p) && isAlive(p), `${step.what}: worker ${p} serves on (now ${now.join(', ')})`);
    }
    if (step.replaces && before.length > 0) {
      await goneAfterDrain(t, before, step.what);
      const now: number[] = await poolPids(d, "a").catch(() => []);
      for (const p of before) assert.ok(!now.includes(p), `${p} is not listed any more`);
    }
    if (i === 0) {
      // Static: the retuned pool starts its third worker beside the two it kept.
      await waitFor(async () => (await poolPids(d, 'a')).length === 3, { timeout: 20_000, what: 'pool a runs max_children 3' });
      const grown = await poolPids(d, 'a');
      assert.ok(oldA.every((p) => grown.includes(p)), `${oldA.join(', ')} kept in ${grown.join(', ')}`);
    }
  }
  await load.more(20);
  await load.stop();
  assert.deepEqual(load.failures, []);
  assert.ok(load.ok > 200, `${load.ok} requests served`);

  // What the daemon says about it.
  const prom = await d.ctl(['status', '--prometheus']);
  const c = checkExposition(prom.stdout);
  assert.deepEqual(c.problems, []);
  assert.equal(sampleValue(c, 'fcgipm_reloads_total', { result: 'ok' }), 9);
  assert.equal(sampleValue(c, 'fcgipm_reloads_total', { result: 'failed' }), 2);
  const s = JSON.parse((await d.ctl(['status', '--json'])).stdout);
  assert.deepEqual(s.pools.map((p: { name: string }) => p.name), ['a'], 'b is gone once drained');
  assert.equal(s.pools[0].pm, 'dynamic');
  assert.equal(s.pools[0].state, 'running');
  assert.deepEqual(s.listeners.map((l: { address: string; pingPath?: string }) => [l.address, l.pingPath]), [[`127.0.0.1:${port}`, '/ping']]);
  const warnings = d.daemon.warningsSince().filter((l) => !(l.kind === 'reload' && l.ok === false) && !String(l.msg).includes('max_children'));
  assert.deepEqual(warnings, []);
  assert.equal(ngx.errorLog().split('\n').filter((l) => /\[(error|crit|alert|emerg)\]/.test(l)).length, 0, ngx.errorLog());
});
