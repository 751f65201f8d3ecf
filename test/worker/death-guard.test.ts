/**
 * No worker outlives the daemon, even when the daemon is SIGKILLed: a stand-in daemon
 * (test/fixtures/workers/mini-daemon.mjs) spawns a worker through the real code, we
 * SIGKILL it and watch /proc.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { createDeathGuard, findSetpriv, WATCHDOG_SCRIPT } from '../../src/worker/death-guard.js';
import { FIXTURE_DIR } from '../fixtures/workers/index.js';
import { killQuiet, makeSpec, processGone, tempDir, waitFor } from './helpers.js';

interface Started {
  daemon: number;
  worker: number;
  guard: string;
  watchdog?: number;
}

/** SIGHUP, SIGINT, SIGQUIT and SIGTERM in a /proc/PID/status signal mask (bit n-1 for signal n). */
const STOP_SIGNALS = (1n << 0n) | (1n << 1n) | (1n << 2n) | (1n << 14n);

function ignoredSignals(pid: number): bigint {
  try {
    const m = /^SigIgn:\s*([0-9a-f]+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0n : BigInt(`0x${m[1]}`);
  } catch {
    return 0n;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function startMiniDaemon(t: { after: (fn: () => void) => void }, specEnv: Record<string, string>, mode: string): Promise<Started> {
  const dir = tempDir(t);
  const spec = makeSpec(dir, ['/usr/bin/php-cgi'], { env: specEnv });
  const proc = spawn(process.execPath, [path.join(FIXTURE_DIR, 'mini-daemon.mjs'), JSON.stringify(spec), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
  let started: Started | undefined;
  const kids: number[] = [];
  t.after(() => {
    killQuiet(proc.pid);
    if (started !== undefined) {
      for (const k of kids) killQuiet(k);
      killQuiet(started.worker);
      killQuiet(started.watchdog);
    }
  });
  let err = '';
  proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
  started = await new Promise<Started>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`mini-daemon did not report: ${err}`)), 10_000);
    proc.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(JSON.parse(out.slice(0, nl)) as Started);
      }
    });
    proc.once('exit', (code) => reject(new Error(`mini-daemon exited ${code}: ${err}`)));
  });
  kids.push(...childrenOf(started.worker));
  return started;
}

test('setpriv --pdeathsig: SIGKILL of the daemon kills its worker', { skip: findSetpriv() === undefined && 'no setpriv here' }, async (t) => {
  const s = await startMiniDaemon(t, { PATH: '/usr/bin:/bin', PHP_FCGI_CHILDREN: '0' }, 'setpriv');
  assert.equal(s.guard, 'setpriv');
  assert.equal(processGone(s.worker), false, 'worker alive while the daemon lives');
  process.kill(s.daemon, 'SIGKILL');
  assert.ok(await waitFor(() => processGone(s.daemon), 5000));
  assert.ok(await waitFor(() => processGone(s.worker), 5000), `worker ${s.worker} outlived the daemon`);
});

test('watchdog fallback: SIGKILL of the daemon kills the worker and its children (process group)', async (t) => {
  const s = await startMiniDaemon(t, { PATH: '/usr/bin:/bin', PHP_FCGI_CHILDREN: '2' }, 'watchdog');
  assert.equal(s.guard, 'watchdog');
  assert.ok(s.watchdog !== undefined);
  let kids: number[] = [];
  assert.ok(await waitFor(() => (kids = childrenOf(s.worker)).length === 2, 3000), 'php-cgi forked its children');
  t.after(() => kids.forEach((k) => killQuiet(k)));
  process.kill(s.daemon, 'SIGKILL');
  assert.ok(await waitFor(() => [s.worker, ...kids].every(processGone), 5000), 'worker group outlived the daemon');
  assert.ok(await waitFor(() => processGone(s.watchdog!), 5000), 'the watchdog ends too');
});

test('watchdog: SIGTERM/SIGINT do not stop it; only EOF on its pipe does, and it forgets exited groups', async (t) => {
  const sh = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, 'wd'], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  // Listened for before any signal is sent: however it ends, the test hears it.
  const exited = once(sh, 'exit');
  const victim = spawn('/bin/sleep', ['30'], { detached: true, stdio: 'ignore' });
  const spared = spawn('/bin/sleep', ['30'], { detached: true, stdio: 'ignore' });
  t.after(() => [sh.pid, victim.pid, spared.pid].forEach((p) => killQuiet(p)));
  // The trap is the script's first line; a signal before the shell has run it kills the
  // shell as it would any process just started. From then on the kernel drops these signals.
  assert.ok(await waitFor(() => (ignoredSignals(sh.pid!) & STOP_SIGNALS) === STOP_SIGNALS, 5000), 'the watchdog ignores HUP, INT, QUIT and TERM');
  sh.stdin.write(`+${victim.pid}\n+${spared.pid}\n-${spared.pid}\nnot-a-number\n`);
  sh.kill('SIGTERM');
  sh.kill('SIGINT');
  assert.equal(processGone(victim.pid!), false);
  sh.stdin.end();
  // Had a signal stopped it, it would have ended by that signal before reading the EOF.
  const [, signal] = await exited;
  assert.equal(signal, null, 'ended by EOF on its pipe, not by a signal');
  assert.ok(await waitFor(() => victim.exitCode !== null || victim.signalCode !== null, 3000));
  assert.equal(victim.signalCode, 'SIGKILL');
  assert.equal(processGone(spared.pid!), false, 'an unregistered group is left alone');
});

test('createDeathGuard: setpriv wraps the command, the others leave it alone', () => {
  assert.deepEqual(createDeathGuard('none').wrap('/bin/x', ['a']), { file: '/bin/x', args: ['a'] });
  assert.deepEqual(createDeathGuard('watchdog').wrap('/bin/x', ['a']), { file: '/bin/x', args: ['a'] });
  const sp = findSetpriv();
  if (sp !== undefined) assert.deepEqual(createDeathGuard('auto').wrap('/bin/x', ['a']), { file: sp, args: ['--pdeathsig', 'KILL', '--', '/bin/x', 'a'] });
});
