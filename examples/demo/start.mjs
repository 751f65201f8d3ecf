#!/usr/bin/env node
// `npm run demo`: fcgi-pm with the demo config (fcgi-pm.yaml here, or the file given).
//
// The config runs the demo's workers as nobody when fcgi-pm runs as root. A checkout
// nobody cannot read (one under /root, mode 0700) would make fcgi-pm refuse to start;
// there, and only when `fcgi-pm check` says that is the one problem, the demo's own
// workers run as root instead, and this says so on stderr.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const bin = fileURLToPath(new URL('../../bin/fcgi-pm', import.meta.url));
const given = process.argv[2] ?? fileURLToPath(new URL('fcgi-pm.yaml', import.meta.url));

const check = (file) => spawnSync(process.execPath, [bin, 'check', '-c', file], { encoding: 'utf8' });

let config = given;
let tempDir;
if (process.geteuid?.() === 0) {
  const first = check(given);
  if (first.status !== 0) {
    const asRoot = parse(readFileSync(given, 'utf8'));
    for (const pool of Object.values(asRoot.pools ?? {})) if (pool.user === 'nobody') pool.user = 'root';
    tempDir = mkdtempSync(join(tmpdir(), 'fcgi-pm-demo-'));
    const file = join(tempDir, 'fcgi-pm.yaml');
    writeFileSync(file, stringify(asRoot));
    if (check(file).status === 0) {
      config = file;
      const why = (first.stderr || first.stdout).trim().split('\n')[0];
      process.stderr.write(`fcgi-pm demo: nobody cannot read this checkout (${why}); the demo's workers run as root. Clone it under /opt or /srv to run them as nobody.\n`);
    }
  }
}

const child = spawn(process.execPath, [bin, 'run', '-c', config], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => {
  if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true });
  process.exitCode = code ?? (signal === null ? 1 : 128);
});
