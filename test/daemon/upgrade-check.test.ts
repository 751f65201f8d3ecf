// The upgrade's check of the new code (upgrade.ts checkSuccessor) serves nothing, so it
// runs at the lowest CPU priority beside the daemon it shares a session with; and its
// verdict is the check's exit status, with the last line it wrote on failure. The bridge,
// whose start is the check when there is one, starts in its own session at the lowest
// weight of that session (its autogroup) and serves at the normal one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { checkSuccessor, startSuccessor } from '../../src/daemon/upgrade.js';

/** A stand-in for the new code: exits 0 once it sees itself at nice `want`, else 1 with what it saw. */
function checkAt(want: number): string[] {
  const src = `const os = require('node:os'); const end = Date.now() + 5000;
    (function look() { const p = os.getPriority();
      if (p === ${want}) process.exit(0);
      if (Date.now() > end) { console.error('Error: nice ' + p); process.exit(1); }
      setTimeout(look, 5); })();`;
  return [process.execPath, '-e', src];
}

test('the check of the new code runs at nice 19', async () => {
  await checkSuccessor(checkAt(19), 10_000);
});

test('a check that fails rejects with its last line, and the daemon keeps serving', async () => {
  await assert.rejects(checkSuccessor([process.execPath, '-e', "console.error('Error: no such pool'); process.exit(1)"], 10_000), /the new code cannot start \(its check exited with code 1: Error: no such pool\); not upgrading, still serving/);
});

const autogroups = existsSync('/proc/sys/kernel/sched_autogroup_enabled') && readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1';

test('a quiet start: the new code starts at autogroup nice 19 and is ready at nice 0', { skip: autogroups ? false : 'no autogroups' }, async () => {
  const niceOf = (pid: number): string => / nice (-?[0-9]+)$/m.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'))?.[1] ?? '';
  const before = new Set(readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').split(' ').filter(Boolean));
  // A stand-in for the bridge: says ready at once, then waits to be killed.
  const ready = startSuccessor([], new Map(), [process.execPath, '-e', "require('node:fs').writeSync(Number(process.env.FCGI_PM_UPGRADE_FD), 'ready\\n'); setTimeout(() => {}, 10000)"], 30_000, {}, true);
  // Spawned already (a new session of its own): read before it can say anything.
  const pid = Number(readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').split(' ').find((p) => p !== '' && !before.has(p)));
  assert.equal(niceOf(pid), '19', 'starting: the lowest weight');
  const s = await ready;
  try {
    assert.equal(s.pid, pid);
    assert.equal(niceOf(pid), '0', 'ready: back to the normal weight');
  } finally {
    process.kill(pid, 'SIGKILL');
  }
});
