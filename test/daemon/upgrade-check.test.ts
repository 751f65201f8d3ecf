// The upgrade's check of the new code (upgrade.ts checkSuccessor) serves nothing, so it
// runs at the lowest CPU priority beside the daemon it shares a session with; and its
// verdict is the check's exit status, with the last line it wrote on failure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkSuccessor } from '../../src/daemon/upgrade.js';

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
