// The upgrade's check of the new code (upgrade.ts checkSuccessor) serves nothing, so it
// runs at the lowest CPU priority beside the daemon it shares a session with; and its
// verdict is the check's exit status, with the last line it wrote on failure. The bridge,
// whose start is the check when there is one, starts in its own session at the lowest
// weight of that session (its autogroup) and serves at the normal one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { checkSuccessor, startSuccessor } from '../../src/daemon/upgrade.js';
import { waitFor } from '../helpers/wait.js';

/** Children of this process, as /proc lists them. */
function ownChildren(): Set<string> {
  return new Set(readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').split(' ').filter(Boolean));
}

test('the check of the new code starts at nice 19, and gets the normal priority back after a while (a saturated CPU would starve it)', async () => {
  const before = ownChildren();
  // A stand-in for the new code: a check that takes a second.
  const checked = checkSuccessor([process.execPath, '-e', 'setTimeout(() => {}, 1000)'], 30_000, 300);
  const pid = Number([...ownChildren()].find((p) => !before.has(p)));
  assert.equal(getPriority(pid), 19, 'starting: the lowest priority');
  await waitFor(() => getPriority(pid) === 0, { timeout: 5000, what: 'nice 0 after 300 ms' });
  await checked;
});

test('a check that fails rejects with its last line, and the daemon keeps serving', async () => {
  await assert.rejects(checkSuccessor([process.execPath, '-e', "console.error('Error: no such pool'); process.exit(1)"], 10_000), /the new code cannot start \(its check exited with code 1: Error: no such pool\); not upgrading, still serving/);
});

const autogroups = existsSync('/proc/sys/kernel/sched_autogroup_enabled') && readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';

test('a quiet start: the new code starts at autogroup nice 19 and is ready at nice 0', { skip: autogroups ? false : 'no autogroups' }, async () => {
  const niceOf = (pid: number): string => / nice (-?[0-9]+)$/m.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'))?.[1] ?? '';
  const before = ownChildren();
  // A stand-in for the bridge: says ready at once, then waits to be killed.
  const ready = startSuccessor([], new Map(), [process.execPath, '-e', "require('node:fs').writeSync(Number(process.env.FCGI_PM_UPGRADE_FD), 'ready\\n'); setTimeout(() => {}, 10000)"], 30_000, {}, true);
  // Spawned already (a new session of its own): read before it can say anything.
  const pid = Number([...ownChildren()].find((p) => !before.has(p)));
  assert.equal(niceOf(pid), '19', 'starting: the lowest weight');
  const s = await ready;
  try {
    assert.equal(s.pid, pid);
    assert.equal(niceOf(pid), '0', 'ready: back to the normal weight');
  } finally {
    process.kill(pid, 'SIGKILL');
  }
});
