// busy_cpu_slice: while requests wait for a pool's workers, the workers run with a long
// CPU slice (so any task that wakes, the daemon, the web server, another pool's worker,
// takes the CPU from them at once); a pool whose requests do not wait keeps the kernel's
// default, and so does a pool with busy_cpu_slice 0; back to the default after the hold.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { PoolStatus } from '../../src/control/types.js';
import { readSlice, setSlice, sliceSupport } from '../../src/memory/cpu-slice.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { opsDaemon } from './helpers.js';

/** Whether this kernel keeps a custom slice (Linux 6.12+ EEVDF): tried on a child of our own. */
async function kernelSlices(): Promise<string | undefined> {
  const why = sliceSupport();
  if (why !== undefined) return why;
  const child = spawn('sleep', ['5'], { stdio: 'ignore' });
  await new Promise((r) => child.once('spawn', r));
  try {
    const err = setSlice(child.pid!, 5_000_000);
    if (err !== undefined) return `sched_setattr: ${err}`;
    return readSlice(child.pid!) === 5_000_000 ? undefined : 'this kernel has no custom CPU slices (Linux 6.12+)';
  } finally {
    child.kill('SIGKILL');
  }
}

const noSlices = await kernelSlices();
const LONG = 10_000_000;

test('a pool whose requests wait runs its workers with the long CPU slice, the others keep the default', { timeout: 60_000, skip: noSlices ?? false }, async (t) => {
  const [busyPort, quietPort, offPort] = [await freePort(), await freePort(), await freePort()];
  const dir = makeTempDir(t);
  const d = await opsDaemon(t, {
    listen: [
      { protocol: 'http', address: `127.0.0.1:${busyPort}`, pool: 'busy', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${quietPort}`, pool: 'quiet', document_root: PHP_FIXTURES },
      { protocol: 'http', address: `127.0.0.1:${offPort}`, pool: 'off', document_root: PHP_FIXTURES },
    ],
    pools: {
      busy: { command: phpCommand(dir, 'slice-busy'), pm: 'static', max_children: 1 },
      quiet: { command: phpCommand(dir, 'slice-quiet'), pm: 'static', max_children: 1 },
      off: { command: phpCommand(dir, 'slice-off'), pm: 'static', max_children: 1, busy_cpu_slice: 0 },
    },
  });
  const pools = async (): Promise<PoolStatus[]> => (JSON.parse((await d.ctl(['status', '--json'])).stdout) as { pools: PoolStatus[] }).pools;
  const ps = await waitFor(async () => {
    const all = await pools();
    return all.every((p) => p.workers.length === 1 && p.workers[0]!.state === 'idle') ? all : undefined;
  }, { timeout: 15_000, what: 'all workers up' });
  const pid = (name: string): number => ps.find((p) => p.name === name)!.workers[0]!.pid!;
  const defaultSlice = readSlice(pid('quiet'))!;
  assert.notEqual(defaultSlice, LONG, 'workers start with the kernel default');

  // Three requests at once on one worker: two wait.
  const slow = (port: number): Promise<number> => httpRequest(`http://127.0.0.1:${port}/sleep.php?ms=700`).then((r) => r.status);
  const answers = Promise.all([slow(busyPort), slow(busyPort), slow(busyPort), slow(offPort), slow(offPort), slow(offPort), httpRequest(`http://127.0.0.1:${quietPort}/hello.php`).then((r) => r.status)]);
  await waitFor(() => (readSlice(pid('busy')) === LONG ? true : undefined), { timeout: 5000, what: "the busy pool's worker on the long slice" });
  assert.equal(readSlice(pid('quiet')), defaultSlice, 'a pool whose requests do not wait keeps the default');
  assert.equal(readSlice(pid('off')), defaultSlice, 'busy_cpu_slice 0: the default, though requests wait');
  assert.deepEqual(await answers, [200, 200, 200, 200, 200, 200, 200]);
  // No request has waited since: the default again after the hold.
  await waitFor(() => (readSlice(pid('busy')) === defaultSlice ? true : undefined), { timeout: 5000, what: "the busy pool's worker back on the default slice" });
});

test("daemon_short_slice: the daemon's event loop runs with the short slice, the workers it starts keep the default", { timeout: 60_000, skip: noSlices ?? false }, async (t) => {
  const dir = makeTempDir(t);
  const port = await freePort();
  const pools = { app: { command: phpCommand(dir, 'slice-daemon'), pm: 'static', max_children: 1 } };
  const d = await opsDaemon(t, { listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'app', document_root: PHP_FIXTURES }], pools });
  const worker = async (ops: typeof d): Promise<number> =>
    waitFor(async () => (JSON.parse((await ops.ctl(['status', '--json'])).stdout) as { pools: PoolStatus[] }).pools[0]!.workers[0]?.pid ?? undefined, { timeout: 15_000, what: 'the worker up' });
  assert.equal(readSlice(d.daemon.pid), 100_000, 'daemon_short_slice on by default: 0.1 ms');
  const w = await worker(d);
  assert.notEqual(readSlice(w), 100_000, 'a worker starts with the kernel default, not the daemon\'s slice');
  assert.equal(readSlice(w), readSlice(process.pid), 'the kernel default, as this test runner has');
  assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);
  // false: the daemon keeps the kernel's default too.
  const off = await opsDaemon(t, { listen: [{ protocol: 'http', address: `127.0.0.1:${await freePort()}`, pool: 'app', document_root: PHP_FIXTURES }], pools: { app: { ...pools.app, command: phpCommand(dir, 'slice-daemon-off') } }, daemon_short_slice: false });
  assert.equal(readSlice(off.daemon.pid), readSlice(process.pid));
});
