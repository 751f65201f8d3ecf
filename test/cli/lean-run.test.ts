// `fcgi-pm run` (the daemon, and an upgrade's check and bridge: a Node start each) loads
// only its own command's modules; the other commands are loaded for them alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { runsDaemon } from '../../src/cli/main.js';
import { REPO_ROOT } from '../helpers/paths.js';

/** The compiled modules of ours that `file` loads before it runs: its static imports, followed. */
function staticClosure(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/^(?:import|export)\s[^;]*?from\s+['"](\.\.?\/[^'"]+)['"]|^import\s+['"](\.\.?\/[^'"]+)['"]/gm)) staticClosure(resolve(dirname(file), m[1] ?? m[2]!), seen);
  return seen;
}

test('the daemon loads no other command: main.js loads run.js alone of the commands before it runs', () => {
  const cli = join(REPO_ROOT, 'dist', 'src', 'cli');
  const loaded = [...staticClosure(join(cli, 'main.js'))].map((f) => relative(cli, f));
  assert.ok(loaded.includes('run.js'));
  for (const other of ['program.js', 'status.js', 'check.js', 'bench.js', 'tune.js', 'dashboard.js', 'workers.js', 'upgrade.js', 'reload.js', 'stop.js']) assert.ok(!loaded.includes(other), `main.js loads ${other}`);
});

test('which arguments run the daemon', () => {
  const cases: Array<[string[], boolean]> = [
    [['run', '-c', 'f.yaml'], true],
    [['--log-level', 'debug', 'run'], true],
    [['--log-format=json', 'run'], true],
    [['status'], false],
    [['--help', 'run'], false],
    [['-V'], false],
    [['help', 'run'], false],
    [[], false],
  ];
  for (const [args, want] of cases) assert.equal(runsDaemon(args), want, args.join(' '));
});
