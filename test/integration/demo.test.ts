// `npm run demo` as it starts (examples/demo/start.mjs with the demo config, on free
// ports): it serves; as root its workers are nobody when nobody can read the checkout,
// else root with a line on stderr that says why.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ManagedChild } from '../helpers/child.js';
import { httpRequest } from '../helpers/http-client.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { descendantsMatching } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { othersCanReach } from '../helpers/world-readable.js';

function euidOf(pid: number): number {
  return Number(/^Uid:\s+\d+\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

test('npm run demo serves; as root its workers are nobody, or root with the reason when nobody cannot read the checkout', { timeout: 60_000 }, async (t) => {
  const cfg = parseYaml(readFileSync(join(REPO_ROOT, 'examples/demo/fcgi-pm.yaml'), 'utf8')) as Record<string, unknown> & { listen: Array<{ address: string }> };
  for (const l of cfg.listen) l.address = `127.0.0.1:${await freePort()}`;
  const file = join(makeTempDir(t, 'fpm-demo-'), 'fcgi-pm.yaml');
  writeFileSync(file, stringifyYaml({ ...cfg, control_socket: 'off' }));
  const child = new ManagedChild('demo', process.execPath, [join(REPO_ROOT, 'examples/demo/start.mjs'), file], { cwd: REPO_ROOT });
  t.after(() => child.stop(10_000));
  const port = Number(cfg.listen[0]!.address.split(':')[1]);
  // An answer, not a connection: the demo's `check` binds the port for a moment before `run` does.
  const r = await waitFor(async () => {
    if (!child.running) throw new Error(`exited: ${child.stderr}`);
    return httpRequest(`http://127.0.0.1:${port}/`, { timeout: 15_000 }).catch(() => undefined);
  }, { timeout: 30_000, what: 'the demo answering' });
  assert.equal(r.status, 200, r.text);
  const [worker] = descendantsMatching(child.pid, 'app.mjs');
  assert.ok(worker !== undefined, child.stderr);
  const nobody = Number(readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('nobody:'))!.split(':')[2]);
  const euid = euidOf(worker.pid);
  if (process.geteuid?.() !== 0) assert.equal(euid, process.geteuid?.());
  else if (othersCanReach(join(REPO_ROOT, 'examples/demo/app.mjs'))) assert.equal(euid, nobody, child.stderr);
  else {
    assert.equal(euid, 0);
    assert.match(child.stderr, /^fcgi-pm demo: nobody cannot read this checkout \(.+\); the demo's workers run as root/m);
  }
});
