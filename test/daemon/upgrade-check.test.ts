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
  // A stand-in for the bridge: says ready once it sees its session at nice 19, then waits.
  const src = `const fs = require('node:fs'); const end = Date.now() + 5000;
    (function look() {
      if (/ nice 19$/m.test(fs.readFileSync('/proc/self/autogroup', 'utf8'))) { fs.writeSync(Number(process.env.FCGI_PM_UPGRADE_FD), 'ready\\n'); setTimeout(() => process.exit(0), 5000); return; }
      if (Date.now() > end) process.exit(1);
      setTimeout(look, 5); })();`;
  const s = await startSuccessor([], new Map(), [process.execPath, '-e', src], 10_000, {}, true);
  try {
    let nice = '';
    for (let i = 0; i < 100 && nice !== '0'; i++) {
      nice = / nice (-?\d+)$/m.exec(readFileSync(`/proc/${s.pid}/autogroup`, 'utf8'))?.[1] ?? '';
      if (nice !== '0') await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(nice, '0', 'ready: back to the normal weight');
  } finally {
    process.kill(s.pid, 'SIGKILL');
  }
});
