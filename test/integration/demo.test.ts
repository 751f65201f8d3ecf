// `npm run demo`'s config (examples/demo/fcgi-pm.yaml) on free ports, started as the
// demo starts it (from the checkout, no --allow-root): it serves, and as root its
// workers run as nobody.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';

function euidOf(pid: number): number {
  return Number(/^Uid:\s+\d+\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

test('the demo config serves without --allow-root; as root its workers are nobody', { timeout: 60_000 }, async (t) => {
  const cfg = parseYaml(readFileSync(join(REPO_ROOT, 'examples/demo/fcgi-pm.yaml'), 'utf8')) as { listen: Array<{ address: string }> };
  for (const l of cfg.listen) l.address = `127.0.0.1:${await freePort()}`;
  const d = await startDaemon(t, { ...cfg, control_socket: 'off' }, { allowRoot: false });
  const r = await httpRequest(`http://${cfg.listen[0]!.address}/`, { timeout: 15_000 });
  assert.equal(r.status, 200, r.text);
  const [worker] = d.descendants('app.mjs');
  assert.ok(worker !== undefined, d.dump());
  const nobody = Number(readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('nobody:'))!.split(':')[2]);
  assert.equal(euidOf(worker), process.geteuid?.() === 0 ? nobody : process.geteuid?.());
  if (process.geteuid?.() !== 0) assert.ok(d.findLog((l) => l.kind === 'notice'), 'not root: user is ignored with a notice');
});
