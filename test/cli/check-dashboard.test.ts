// check: a dashboard answering plain HTTP beyond this host gets a notice (its token and
// cookies would cross the network in clear); on loopback, none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBin } from './helpers.js';

test('check: a dashboard on a non-loopback address without TLS in front gets a notice', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-dash-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'c.yaml');
  const write = (address: string): void =>
    writeFileSync(file, `listen:\n  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: app }\npools:\n  app: { backends: ["127.0.0.1:9001"] }\ncontrol_socket: off\ndashboard:\n  address: "${address}"\n  token: 0123456789abcdef0123\n`);
  for (const address of ['0.0.0.0:9910', '192.0.2.10:9910']) {
    write(address);
    const r = await runBin(['check', '-c', file]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stderr, new RegExp(`notice: .*dashboard\\.address: the dashboard answers plain HTTP on ${address.replace(/\./g, '\\.')}, not only on this host`));
  }
  for (const address of ['127.0.0.1:9910', '[::1]:9910']) {
    write(address);
    const r = await runBin(['check', '-c', file]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stderr + r.stdout, /dashboard\.address/, address);
  }
});
