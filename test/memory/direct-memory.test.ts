// accept: direct workers are the pool's like any others for memory (real nginx, real
// php-cgi, the daemon inside a memory cgroup the test creates): they sit in the pool's own
// cgroup with the workers' OOM score, and memory_limit counts them, so a burst of big
// requests on the direct socket never runs more workers than the limit holds (the rest
// wait in the backlog and are all served). Needs root and a memory controller; skips
// with the reason otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { memoryFiles } from '../../src/memory/cgroup.js';
import { directSocketSupport } from '../../src/worker/shared-socket.js';
import { makeMemoryBox } from '../helpers/cgroup.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxDirect } from '../helpers/nginx.js';
import { PHP_CGI, PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { opsDaemon } from '../ops/helpers.js';

const MiB = 1024 * 1024;

function procsOf(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'latin1').split('\n').filter((x) => x !== '').map(Number);
  } catch {
    return [];
  }
}

/** The state letter and name from /proc/PID/stat ("S php-cgi"), or "gone". */
function procState(pid: number): string {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return `${st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3)} ${st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'))}`;
  } catch {
    return 'gone';
  }
}

test('a direct pool with memory_limit: its workers sit in the pool cgroup with the workers\' OOM score, and a burst never runs more of them than the limit holds', { timeout: 90_000 }, async (t) => {
  assert.equal(directSocketSupport(), undefined);
  const box = makeMemoryBox(t, undefined);
  if (typeof box === 'string') return t.skip(box);
  const dir = makeTempDir(t, 'fpm-direct-mem-');
  const port = await freePort();
  const limit = 170 * MiB;
  const o = await opsDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
    pools: {
      app: {
        command: [PHP_CGI, '-d', 'memory_limit=-1', '-d', 'opcache.enable=0', '-d', `error_log=${join(dir, 'php.log')}`],
        user: 'root',
        accept: 'direct',
        direct_listen: `unix:${dir}/direct.sock`,
        direct_socket_mode: '0666',
        pm: 'ondemand',
        max_children: 8,
        memory_limit: '170MiB',
        expected_worker_memory: '52MiB',
        memory_sample_interval: '100ms',
        idle_timeout: '30s',
      },
    },
  }, { cgroupProcs: box.procs });
  const d = o.daemon;
  const created = await d.waitForLog((l) => /workers run in memory cgroup/.test(String(l.msg)), { what: 'the pool cgroup line' });
  const poolDir = String(created.cgroup);
  assert.ok(poolDir.startsWith(box.dir + '/'), `${poolDir} is under the daemon's cgroup ${box.dir}`);
  assert.equal(Number(readFileSync(join(poolDir, memoryFiles(box.cg.version).limit), 'latin1')), limit);
  const ngx = await startNginxDirect(t, PHP_FIXTURES, `${dir}/direct.sock`, port, '60s');
  const get = (path: string): Promise<{ status: number; text: string }> => httpRequest(`${ngx.url}${path}`, { timeout: 60_000 });

  // The warm-up holds what the waves hold: the pool's estimate is its workers' measured peaks,
  // and a small first page would let the waves' first spawns in at that page's size before
  // a sample (late on a loaded machine) shows them grown.
  const warm = await get('/alloc.php?mb=40');
  assert.equal(warm.status, 200, warm.text);
  const wpid = Number(/pid (\d+)/.exec(warm.text)![1]);
  assert.ok(procsOf(poolDir).includes(wpid), `direct worker ${wpid} in ${poolDir}: ${procsOf(poolDir).join(',')}`);
  assert.equal(Number(readFileSync(`/proc/${wpid}/oom_score_adj`, 'latin1').trim()), 800);

  // Waves of eight requests holding 40 MiB each (about 50 MiB PSS a worker, less as more share php-cgi's pages).
  let maxProcs = 0;
  let atMax = '';
  const mark = d.mark();
  const sample = setInterval(() => {
    const procs = procsOf(poolDir);
    if (procs.length <= maxProcs) return;
    maxProcs = procs.length;
    atMax = procs.map((p) => `${p} ${procState(p)}`).join(', ');
  }, 10);
  t.after(() => clearInterval(sample));
  for (let wave = 0; wave < 2; wave++) {
    const res = await Promise.all(Array.from({ length: 8 }, () => get('/alloc.php?mb=40&ms=400')));
    assert.deepEqual(res.map((r) => r.status), Array(8).fill(200), res.map((r) => r.text).join('\n'));
  }
  clearInterval(sample);
  const st = JSON.parse((await o.ctl(['status', '--json'])).stdout).pools.find((p: { name: string }) => p.name === 'app');
  t.diagnostic(`max workers in the pool cgroup ${maxProcs}; memory ${JSON.stringify(st.memory)}`);
  // Each holds 40 MiB of its own plus its share of php-cgi's pages (PSS splits what they
  // share, so the more run, the smaller each measures): three fit 170 MiB, four at most, never eight.
  assert.ok(maxProcs >= 2 && maxProcs <= 4, `saw ${maxProcs} php-cgi processes in the pool's cgroup (the limit holds three or four): ${atMax}\n${d.dump(mark, 80)}`);
  assert.equal(st.memory.limit, limit);
  assert.ok(st.memory.refusedSpawns > 0, 'spawns were held back by memory_limit');
  assert.ok(st.memory.total > 0, 'the direct workers are measured as the pool\'s');
  assert.ok(st.workers.some((w: { memory?: object }) => w.memory !== undefined), 'each worker shows its own sample');
});
