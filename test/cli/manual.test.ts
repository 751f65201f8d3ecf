// The man pages and completions are rendered from the commander program, and the exit
// codes they state are the ones the commands use: a page per command with the shared
// EXIT STATUS, zsh and fish completion that parse and name every command, and
// `reopen-logs` without a daemon exiting 3 as its --help, its page and the logrotate file say.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildProgram } from '../../src/cli/program.js';
import { commandPageName, EXIT_CODES, renderCommandManPage, renderFishCompletion, renderZshCompletion } from '../../src/cli/manual.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';
import { runBin } from './helpers.js';

test('a man page per command, each with its help and the shared exit codes; man renders it', (t) => {
  const program = buildProgram();
  const dir = makeTempDir(t, 'fpm-man-');
  for (const c of program.commands) {
    const page = renderCommandManPage(c, '0.0.0', '2026-12-02');
    assert.match(page, new RegExp(`^\\.TH ${commandPageName(c).toUpperCase().replace(/-/g, '\\\\?-')} 8 `));
    assert.ok(page.includes('.SH EXIT STATUS'), c.name());
    for (const [code] of EXIT_CODES) assert.ok(page.includes(`.B ${code}\n`), `${c.name()}: exit ${code}`);
    writeFileSync(join(dir, `${commandPageName(c)}.8`), page);
  }
  if (existsSync('/usr/bin/man')) {
    const text = execFileSync('man', ['-l', join(dir, 'fcgi-pm-status.8')], { encoding: 'utf8', env: { ...process.env, MANWIDTH: '100', MAN_KEEP_FORMATTING: '', PAGER: 'cat' } });
    assert.match(text, /fcgi-pm status/);
    assert.match(text, /EXIT STATUS/);
  }
});

test('zsh and fish completion name every command and parse', (t) => {
  const program = buildProgram();
  const zsh = renderZshCompletion(program);
  const fish = renderFishCompletion(program);
  for (const c of program.commands) {
    assert.ok(zsh.includes(`'${c.name()}:`), `zsh: ${c.name()}`);
    assert.ok(fish.includes(`-a ${c.name()} `), `fish: ${c.name()}`);
  }
  assert.match(fish, /__fish_seen_subcommand_from check" -s c -l config -r -F/);
  const dir = makeTempDir(t, 'fpm-compl-');
  for (const [shell, text, file] of [['/usr/bin/zsh', zsh, '_fcgi-pm'], ['/usr/bin/fish', fish, 'fcgi-pm.fish']] as const) {
    if (!existsSync(shell)) continue;
    writeFileSync(join(dir, file), text);
    const r = spawnSync(shell, ['-n', join(dir, file)], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${shell} -n: ${r.stderr}`);
  }
});

test('reopen-logs with no daemon exits 3, as its --help, the exit code table and the logrotate file say', async (t) => {
  const dir = makeTempDir(t, 'fpm-exit-');
  const r = await runBin(['reopen-logs', '--control', join(dir, 'none.sock')]);
  assert.equal(r.code, 3, r.stderr);
  const help = await runBin(['reopen-logs', '--help']);
  assert.match(help.stdout, /exit 3 when\s+no daemon answers/);
  assert.match(EXIT_CODES.find(([c]) => c === 3)![1], /reopen-logs/);
  assert.match(readFileSync(join(REPO_ROOT, 'examples/systemd/logrotate'), 'utf8'), /reopen-logs exits 3 with the reason when no daemon answers/);
});
