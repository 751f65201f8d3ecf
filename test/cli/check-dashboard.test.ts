// check: a dashboard answering plain HTTP beyond this host gets a notice (its token and
// cookies would cross the network in clear); on loopback, none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBin } from './helpers.js';
import { freePort } from '../helpers/ports.js';

test('check: a dashboard on a non-loopback address without TLS in front gets a notice', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fpm-dash-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'c.yaml');
  const write = (address: string): void =>
    writeFileSync(file, `listen:\n  - { protocol: fastcgi, address: "127.0.0.1:9000", pool: app }\npools:\n  app: { backends: ["127.0.0.1:9001"] }\ncontrol_socket: off\ndashboard:\n  address: "${address}"\n  token: 0123456789abcdef0123\n`);
  const port = await freePort();
  for (const address of [`0.0.0.0:${port}`, `192.0.2.10:${port}`]) {
    write(address);
    const r = await runBin(['check', '-c', file]);
    assert.match(r.stderr, new RegExp(`notice: .*dashboard\\.address: the dashboard answers plain HTTP on ${address.replace(/\./g, '\\.')}, not only on this host`));
    // An address no interface of this host has cannot be bound: run would fail.
    if (address.startsWith('192.0.2.')) assert.match(r.stderr, /dashboard\.address: 192\.0\.2\.10:\d+: no interface of this host has that address \(EADDRNOTAVAIL\)/);
    assert.equal(r.code, address.startsWith('192.0.2.') ? 1 : 0, r.stderr + r.stdout);
  }
  for (const address of ['127.0.0.1:9910', '[::1]:9910']) {
    write(address);
    const r = await runBin(['check', '-c', file]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.doesNotMatch(r.stderr + r.stdout, /dashboard\.address/, address);
  }
});
