// `fcgi-pm --help` is where a newcomer starts: its minimal config must pass `check` as
// the user running it (as root that means workers with a `user`), and every quick-form
// example that spawns workers names one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { FCGI_PM_BIN } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';

const run = promisify(execFile);

test('the minimal config in fcgi-pm --help passes check; spawning examples name a user', async (t) => {
  const help = (await run(process.execPath, [FCGI_PM_BIN, '--help'])).stdout;
  const block = /A minimal config file:\n((?: {2}.*\n)+)/.exec(help);
  assert.ok(block, help);
  const yaml = block[1]!.split('\n').map((l) => l.slice(2)).join('\n');
  const file = join(makeTempDir(t, 'fpm-help-'), 'fcgi-pm.yaml');
  writeFileSync(file, yaml);
  const out = await run(process.execPath, [FCGI_PM_BIN, 'check', '-c', file]);
  assert.match(out.stdout, /config OK/);
  const runHelp = (await run(process.execPath, [FCGI_PM_BIN, 'help', 'run'])).stdout;
  for (const text of [help, runHelp]) {
    const spawning = text.split('\n').filter((l) => /^\s+fcgi-pm run .*--command/.test(l));
    assert.ok(spawning.length > 0);
    for (const l of spawning) assert.match(l, /--user \S+/, l);
  }
});
