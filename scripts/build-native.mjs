// Builds the optional addon for `accept: direct` pools (native/direct-socket.c) with the
// C compiler and Node's own headers, at install like better-sqlite3. Never fails the
// install: without a compiler or headers the daemon runs direct pools through their
// proxy listener instead (docs/direct.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const src = path.join(root, 'native', 'direct-socket.c');
const out = path.join(root, 'native', 'build', 'direct-socket.node');
if (process.platform !== 'linux' || !fs.existsSync(src)) process.exit(0);

const candidates = [path.resolve(path.dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'];
const include = candidates.find((d) => fs.existsSync(path.join(d, 'node_api.h')) && fs.existsSync(path.join(d, 'uv.h')));
if (include === undefined) {
  console.warn('fcgi-pm: Node headers not found (node_api.h, uv.h); accept: direct pools will run through their proxy listener');
  process.exit(0);
}
fs.mkdirSync(path.dirname(out), { recursive: true });
const cc = process.env.CC ?? 'cc';
// Built beside and renamed over: a running daemon keeps the file it mapped.
const tmp = `${out}.${process.pid}.tmp`;
const r = spawnSync(cc, ['-O2', '-Wall', '-shared', '-fPIC', '-DNODE_GYP_MODULE_NAME=direct_socket', `-I${include}`, '-o', tmp, src], { stdio: 'inherit' });
if (r.status === 0) {
  fs.renameSync(tmp, out);
} else {
  console.warn(`fcgi-pm: could not build native/direct-socket.c (${r.error?.message ?? `${cc} exited ${r.status}`}); accept: direct pools will run through their proxy listener`);
  fs.rmSync(tmp, { force: true });
}
