/**
 * Runs the WSGI adapter's Python unit tests (test/python/test_*.py, unittest) so the
 * project's one test command covers them. Debian's /usr/bin/python3 on purpose: a
 * python3 earlier on PATH may be another build without Debian's packages.
 */
import { execFile, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { REPO_ROOT } from '../helpers/paths.js';
import { trackPid, untrackPid } from '../helpers/scope.js';

const PYTHON = '/usr/bin/python3';

test('fcgi_pm_wsgi: Python unit tests (unittest discover -s test/python)', { timeout: 120_000 }, async (t) => {
  const child = spawn(PYTHON, ['-B', '-m', 'unittest', 'discover', '-s', join(REPO_ROOT, 'test', 'python'), '-v'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackPid(child.pid!);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  const timer = setTimeout(() => child.kill('SIGKILL'), 110_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  untrackPid(child.pid!);

  const ran = /^Ran (\d+) tests? in/m.exec(out);
  const passed = out.split('\n').filter((l) => / \.\.\. ok$/.test(l)).length;
  t.diagnostic(`${ran ? ran[1] : '?'} Python tests ran, ${passed} ok`);
  assert.equal(code, 0, `python unittest failed:\n${out.slice(-6000)}`);
  assert.ok(ran && Number(ran[1]) >= 60, `expected the whole suite to be discovered:\n${out.slice(-2000)}`);
  assert.match(out, /\nOK\b/);
});

test('the npm package ships the adapter: bin/fcgi-pm-wsgi and every module of fcgi_pm_wsgi/', async () => {
  const out = await new Promise<string>((resolve, reject) => {
    execFile('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: REPO_ROOT, maxBuffer: 64 << 20 }, (err, stdout) =>
      err ? reject(err) : resolve(stdout));
  });
  const shipped = new Set((JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path));
  const modules = readdirSync(join(REPO_ROOT, 'fcgi_pm_wsgi')).filter((f) => f.endsWith('.py'));
  assert.ok(modules.includes('main.py'), `fcgi_pm_wsgi/ read: ${modules.join(', ')}`);
  const missing = ['bin/fcgi-pm-wsgi', ...modules.map((m) => `fcgi_pm_wsgi/${m}`)].filter((p) => !shipped.has(p));
  assert.deepEqual(missing, []);
});
