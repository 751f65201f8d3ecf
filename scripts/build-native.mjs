// Builds the optional addons with the C compiler and Node's own headers, at install like
// better-sqlite3: native/direct-socket.c for `accept: direct` pools, native/exec-in-place.c
// for an upgrade in place that keeps the pid and a worker's spawn without a fork of the
// daemon, native/sched-slice.c for busy_cpu_slice.
// Never fails the install: without a compiler or headers, direct pools run through their
// proxy listener (docs/direct.md), an upgrade starts a new daemon with a new pid and
// workers are spawned by Node's fork (docs/operations.md), and busy pools keep the kernel's slice (docs/overload.md).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const addons = [
  { name: 'direct_socket', src: 'direct-socket.c', out: 'direct-socket.node', without: 'accept: direct pools will run through their proxy listener' },
  { name: 'exec_in_place', src: 'exec-in-place.c', out: 'exec-in-place.node', without: 'an upgrade in place will start a new daemon with a new pid, and workers are spawned by a fork of the daemon' },
  { name: 'sched_slice', src: 'sched-slice.c', out: 'sched-slice.node', without: "a pool whose requests wait keeps the kernel's default CPU slice (busy_cpu_slice)" },
];
if (process.platform !== 'linux') process.exit(0);

const candidates = [path.resolve(path.dirname(process.execPath), '..', 'include', 'node'), '/usr/include/node', '/usr/local/include/node'];
const include = candidates.find((d) => fs.existsSync(path.join(d, 'node_api.h')) && fs.existsSync(path.join(d, 'uv.h')));
if (include === undefined) {
  console.warn(`fcgi-pm: Node headers not found (node_api.h, uv.h); ${addons.map((a) => a.without).join('; ')}`);
  process.exit(0);
}
const cc = process.env.CC ?? 'cc';
// A packager's flags (scripts/build-deb.sh passes dpkg-buildflags': hardening, debug info).
const flags = (name) => (process.env[name] ?? '').split(/\s+/).filter(Boolean);
for (const a of addons) {
  const src = path.join(root, 'native', a.src);
  const out = path.join(root, 'native', 'build', a.out);
  if (!fs.existsSync(src)) continue;
  fs.mkdirSync(path.dirname(out), { recursive: true });
  // Built beside and renamed over: a running daemon keeps the file it mapped.
  const tmp = `${out}.${process.pid}.tmp`;
  const r = spawnSync(cc, ['-O2', '-Wall', ...flags('CPPFLAGS'), ...flags('CFLAGS'), '-shared', '-fPIC', `-DNODE_GYP_MODULE_NAME=${a.name}`, `-I${include}`, '-o', tmp, src, ...flags('LDFLAGS')], { stdio: 'inherit' });
  if (r.status === 0) {
    fs.renameSync(tmp, out);
  } else {
    console.warn(`fcgi-pm: could not build native/${a.src} (${r.error?.message ?? `${cc} exited ${r.status}`}); ${a.without}`);
    fs.rmSync(tmp, { force: true });
  }
}
