// `fcgi-pm tune` against a real daemon spawning fixture FastCGI workers, and the
// recommendation rule on its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { recommend, doublingSizes, type TuneSize, type TuneStep } from '../../src/bench/tune.js';
import { needsAnotherRun, relativeSpread } from '../../src/bench/tune-plan.js';
import { parseTarget } from '../../src/bench/target.js';
import { tuneConfigObject } from '../../src/cli/tune.js';
import { configFromObject } from '../../src/config/schema.js';
import { loadConfig } from '../../src/config/load.js';
import { fixturePath } from '../fixtures/workers/index.js';
import { FCGI_PM_BIN } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { listProcesses } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';

function sizeResult(size: number, rps: number, memMiB: number, over: Partial<TuneStep> = {}): TuneSize {
  const best: TuneStep = { size, concurrency: size, rps, p50Ms: 1, p99Ms: 2, replies: 1000, errors: 0, failedStatus: 0, repeats: 3, rpsRuns: [rps, rps, rps], spread: 0, ...over };
  return { size, steps: [best], best, workers: size, memPerWorker: memMiB * 1048576, memKind: 'pss', daemonRss: 0 };
}

test('recommend: the smallest size within tolerance of the best, inside the budget', () => {
  const sizes = [sizeResult(1, 1000, 30), sizeResult(2, 1900, 30), sizeResult(4, 3000, 30), sizeResult(8, 3100, 30), sizeResult(16, 3050, 30)];
  const r = recommend(sizes, 10 * 1024 ** 3, 0.05)!;
  assert.equal(r.size, 4, r.reason);
  assert.equal(r.bestSize, 8);
  assert.ok(r.fits);
  // A budget for 2 workers of 30 MiB: the best that fits, said plainly.
  const tight = recommend(sizes, 70 * 1048576, 0.05)!;
  assert.equal(tight.size, 2);
  assert.match(tight.reason, /memory budget/);
  const none = recommend(sizes, 10 * 1048576, 0.05)!;
  assert.equal(none.fits, false);
  // Sizes that mostly failed do not count, whatever their rate.
  const failing = [sizeResult(1, 1000, 30), sizeResult(2, 50_000, 30, { failedStatus: 900 })];
  assert.equal(recommend(failing, 1e12, 0.05)!.size, 1);
  assert.equal(recommend([sizeResult(1, 10, 1, { errors: 1000, replies: 0 })], 1e12, 0.05), undefined);
  assert.deepEqual(doublingSizes(12), [1, 2, 4, 8, 12]);
  assert.deepEqual(doublingSizes(1), [1]);
});

test('a step runs at least min times, more while its spread is above the limit, at most max', () => {
  const rule = { min: 3, max: 5, spread: 0.1 };
  assert.equal(relativeSpread([100, 105, 95]), 0.1);
  assert.equal(relativeSpread([100]), 0);
  assert.equal(needsAnotherRun([], rule), true);
  assert.equal(needsAnotherRun([100, 100], rule), true);
  assert.equal(needsAnotherRun([100, 104, 98], rule), false, 'spread 6 %: known well enough');
  assert.equal(needsAnotherRun([100, 130, 98], rule), true, 'spread 31 %: once more');
  assert.equal(needsAnotherRun([100, 130, 98, 101], rule), true);
  assert.equal(needsAnotherRun([100, 130, 98, 101, 99], rule), false, 'bounded: 5 runs at most');
});

test('the generated config validates, keeps the pool settings, listens where the target points', (t) => {
  const dir = makeTempDir(t, 'fpm-tune-');
  const file = join(dir, 'c.yaml');
  writeFileSync(file, stringifyYaml({
    listen: [
      { protocol: 'http', address: '127.0.0.1:8080', pool: 'app', document_root: '.', params: { APP_ENV: 'prod' } },
      { protocol: 'fastcgi', address: 'unix:/run/x.sock', pool: 'other' },
    ],
    pools: {
      app: { command: ['./app', '--x'], pm: 'dynamic', max_children: 3, min_spare: 1, max_spare: 2, request_timeout: '30s', env: { A: 'b' } },
      other: { backends: ['127.0.0.1:9001'] },
    },
  }));
  const cfg = loadConfig(file);
  const obj = tuneConfigObject(cfg, cfg.pools.get('app')!, parseTarget('http://127.0.0.1:9911/index.php'), 6);
  const back = configFromObject(obj, '<tune>', { baseDir: '/' });
  assert.equal(back.listen.length, 1);
  const l = back.listen[0]!;
  assert.deepEqual([l.protocol, l.address.text, l.pool, l.documentRoot, l.params.APP_ENV], ['http', '127.0.0.1:9911', 'app', dir, 'prod']);
  assert.deepEqual([...back.pools.keys()], ['app']);
  const p = back.pools.get('app')!;
  assert.deepEqual([p.pm, p.maxChildren, p.startChildren, p.requestTimeout, p.env.A], ['static', 6, 6, 30_000, 'b']);
  assert.equal(p.command![0], join(dir, 'app'), 'relative command resolved against the original file');
  assert.equal(back.log.access, false);
});

test('fcgi-pm tune: sizes 1 and 2 measured with workers and memory found, a recommendation, nothing left running', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-tune-');
  const file = join(dir, 'c.yaml');
  writeFileSync(file, stringifyYaml({
    listen: [{ protocol: 'fastcgi', address: '127.0.0.1:1', pool: 'node' }],
    pools: { node: { command: [process.execPath, fixturePath('responder')], pm: 'ondemand', max_children: 2 } },
  }));
  const port = await freePort();
  const args = [FCGI_PM_BIN, 'tune', '-c', file, '--sizes', '1,2', '--concurrency', '1,3', '--step', '400ms', '--warmup', '100ms', '--runs', '2', '--max-runs', '4', '--allow-root', '--json', `fcgi://127.0.0.1:${port}/x?size=200`];
  const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, args, { timeout: 50_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : ((err as { code?: number }).code ?? null), stdout: String(stdout), stderr: String(stderr) });
    });
  });
  assert.equal(r.code, 0, r.stderr + r.stdout);
  const j = JSON.parse(r.stdout) as { schema: string; pool: string; sizes: TuneSize[]; recommendation: { size: number; reason: string } };
  assert.equal(j.schema, 'fcgi-pm-tune/1');
  assert.equal(j.pool, 'node');
  assert.deepEqual(j.sizes.map((s) => s.size), [1, 2]);
  for (const s of j.sizes) {
    assert.equal(s.workers, s.size, 'pm static: that many workers under the daemon');
    assert.deepEqual(s.steps.map((x) => x.concurrency), [1, 3]);
    for (const st of s.steps) {
      assert.ok(st.repeats >= 2 && st.repeats <= 4, `runs ${st.repeats}`);
      assert.equal(st.rpsRuns.length, st.repeats);
      assert.equal(typeof st.spread, 'number');
      assert.ok(st.replies > 0);
      assert.equal(st.errors, 0);
      assert.equal(st.failedStatus, 0);
    }
    // A Node worker is tens of MiB; PSS counts its own pages at least.
    assert.ok(s.memPerWorker > 4 * 1048576, `memory per worker ${s.memPerWorker}`);
    assert.equal(s.memKind, 'pss');
    assert.ok(s.daemonRss > 0);
  }
  assert.ok([1, 2].includes(j.recommendation.size), j.recommendation.reason);
  // Daemons of this checkout only: another checkout's tune may run on the same machine.
  const left = listProcesses().filter((p) => (p.cmdline.includes('fcgi-pm-tune-') && p.cmdline.includes(FCGI_PM_BIN)) || p.cmdline.includes(`:${port}`));
  assert.deepEqual(left, [], 'every daemon tune started is gone');
});
