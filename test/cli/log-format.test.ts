// Human log lines for people: --log-format pretty, and auto on a terminal (a real
// pseudo-terminal through util-linux script(1)); JSON when forced or piped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { join } from 'node:path';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { BIN, runBin } from './helpers.js';

/** A port something else holds: the daemon logs its start-up lines, fails to bind, exits 1. */
async function blockedPort(t: { after(fn: () => unknown): void }): Promise<number> {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.after(() => blocker.close());
  return (blocker.address() as net.AddressInfo).port;
}

const quick = (port: number): string[] => ['run', '--http', `127.0.0.1:${port}`, '--backend', 'fastcgi://127.0.0.1:1'];
const HUMAN_POOL_LINE = /^\d\d:\d\d:\d\d\.\d{3} (\x1b\[32m)?INFO (\x1b\[0m)? pool default: fastcgi backends 127\.0\.0\.1:1  kind=pool pool=default type=external/m;
const HUMAN_FATAL_LINE = /^\d\d:\d\d:\d\d\.\d{3} (\x1b\[35m)?FATAL(\x1b\[0m)? could not start\b.*  code=ERR_LISTEN_FAILED /m;

/** Runs the CLI with stdout on a pseudo-terminal; resolves with what the terminal showed. */
function onTerminal(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const cmd = [BIN, ...args].map((a) => `'${a}'`).join(' ');
  return new Promise((resolve, reject) => {
    execFile('script', ['-q', '-e', '-c', cmd, '/dev/null'], { timeout: 20_000, env: { ...process.env, ...env } }, (err, stdout) => {
      if (err !== null && typeof err.code !== 'number') reject(err);
      else resolve(String(stdout).replace(/\r\n/g, '\n'));
    });
  });
}

test('--log-format pretty: human lines, code first', { timeout: 30_000 }, async (t) => {
  const r = await runBin(['--log-format', 'pretty', ...quick(await blockedPort(t))]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stdout, HUMAN_POOL_LINE);
  assert.match(r.stdout, HUMAN_FATAL_LINE);
  assert.doesNotMatch(r.stdout, /"level":/);
});

test('piped stdout stays JSON lines (auto)', { timeout: 30_000 }, async (t) => {
  const r = await runBin(quick(await blockedPort(t)));
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.ok(lines.some((l) => l.code === 'ERR_LISTEN_FAILED' && l.level === 60), r.stdout);
});

test('on a terminal: human lines with a coloured level; --log-format json forces JSON', { timeout: 40_000 }, async (t) => {
  const port = await blockedPort(t);
  const tty = await onTerminal(quick(port));
  assert.match(tty, HUMAN_POOL_LINE);
  assert.match(tty, /\x1b\[32mINFO \x1b\[0m/, 'colour on a terminal');
  assert.match(tty, HUMAN_FATAL_LINE);
  const plain = await onTerminal(quick(port), { NO_COLOR: '1' });
  assert.doesNotMatch(plain, /\x1b\[/, 'NO_COLOR is honoured');
  const json = await onTerminal(['--log-format', 'json', ...quick(port)]);
  assert.match(json, /^\{"level":30,.*"msg":"pool default: /m);
});

test('log.format in the config file: json on a terminal', { timeout: 40_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-logfmt-');
  const port = await blockedPort(t);
  const file = join(dir, 'fcgi-pm.yaml');
  writeFileSync(file, `listen:\n  - { protocol: http, address: "127.0.0.1:${port}", pool: app }\npools:\n  app: { backends: ["127.0.0.1:${await freePort()}"] }\nlog: { format: json }\n`);
  assert.match(await onTerminal(['run', '-c', file]), /^\{"level":30,/m);
});
