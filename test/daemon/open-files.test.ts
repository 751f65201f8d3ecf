/**
 * RLIMIT_NOFILE at start: the soft limit is raised to the hard one (prlimit on our own
 * pid where Node did not already do it), the start-up line says what it is, and the
 * running daemon really has it.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseNofile } from '../../src/daemon/open-files.js';
import { startDaemon } from '../helpers/daemon.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';

const PRLIMIT = '/usr/bin/prlimit';

/** Runs raiseOpenFilesLimit() in a fresh node whose soft limit was first lowered to 512 (hard 4096). */
function raiseInChild(withPrlimit: boolean): { before: number; soft: number; hard: number; problem?: string } {
  const mod = join(REPO_ROOT, 'dist', 'src', 'daemon', 'open-files.js');
  const script = `
    import { execFileSync } from 'node:child_process';
    const { raiseOpenFilesLimit } = await import(${JSON.stringify(mod)});
    execFileSync(${JSON.stringify(PRLIMIT)}, ['--pid', String(process.pid), '--nofile=512:4096']);
    console.log(JSON.stringify(raiseOpenFilesLimit(${withPrlimit ? 'undefined' : "'/nonexistent/prlimit'"})));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as ReturnType<typeof raiseInChild>;
}

describe('open files limit', { timeout: 30_000 }, () => {
  const scope = new Cleanup();
  after(() => scope.run());

  it('parses /proc/<pid>/limits', () => {
    const text = 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 1048576              files\n';
    assert.deepEqual(parseNofile(text), [1024, 1048576]);
    assert.deepEqual(parseNofile('Max open files  unlimited  unlimited  files'), [Infinity, Infinity]);
    assert.equal(parseNofile('nothing here'), undefined);
  });

  it('raises a soft limit below the hard one with prlimit on its own pid', () => {
    assert.deepEqual(raiseInChild(true), { before: 512, soft: 4096, hard: 4096 });
  });

  it('says why when it cannot', () => {
    const r = raiseInChild(false);
    assert.equal(r.soft, 512);
    assert.match(r.problem ?? '', /prlimit failed/);
  });

  it('the daemon runs with the hard limit and its start-up line says so', async () => {
    const port = await freePort();
    const d = await startDaemon(
      scope,
      { listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'p' }], pools: { p: { backends: ['127.0.0.1:1'] } } },
      { prefix: [PRLIMIT, '--nofile=1024:4096'] },
    );
    const line = await d.waitForLog((l) => l.kind === 'open_files', { what: 'the open files line' });
    assert.equal(line.soft, 4096);
    assert.equal(line.hard, 4096);
    assert.match(String(line.msg), /^open files: (1024 → )?4096\b/);
    assert.deepEqual(parseNofile(readFileSync(`/proc/${d.pid}/limits`, 'utf8')), [4096, 4096]);
  });
});
