/**
 * lighttpd as the client: its mod_fastcgi (Unix socket) and mod_scgi (TCP) in front of
 * our listeners with a fake pool. lighttpd frames requests differently from nginx (its
 * own record sizes, no FCGI_KEEP_CONN), so this pins interoperability with a second
 * real implementation.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { ManagedChild } from '../helpers/child.js';
import { FakePool, echoBodyAfterEnd, echoParams, failWith } from '../helpers/fake-pool.js';
import { httpRequest, httpUpload } from '../helpers/http-client.js';
import { seededBytes, sha256 } from '../helpers/payload.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, waitFor } from '../helpers/wait.js';
import { startRig, type Rig } from './support.js';

describe('lighttpd → fcgi-pm front ends', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  const pool = new FakePool();
  let fcgi: Rig;
  let url = '';

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-lt-');
    const sock = join(dir, 'f.sock');
    fcgi = await startRig(scope, 'fastcgi', `unix:${sock}`, { pool, cfg: { idleTimeout: 10_000 } });
    const scgi = await startRig(scope, 'scgi', '127.0.0.1:0', { pool, cfg: { idleTimeout: 10_000 } });
    const port = await freePort();
    const conf = join(dir, 'lighttpd.conf');
    writeFileSync(
      conf,
      `
server.port = ${port}
server.bind = "127.0.0.1"
server.document-root = "${dir}"
server.errorlog = "${dir}/error.log"
server.max-request-size = 65536
server.modules += ("mod_fastcgi", "mod_scgi")
fastcgi.server = ("/fcgi/" => (( "socket" => "${sock}", "check-local" => "disable" )))
scgi.server = ("/scgi/" => (( "host" => "127.0.0.1", "port" => ${scgi.listener.address.split(':')[1]}, "check-local" => "disable" )))
`,
    );
    const child = new ManagedChild('lighttpd', '/usr/sbin/lighttpd', ['-D', '-f', conf], {});
    scope.after(() => child.stop(5000));
    await waitFor(
      async () => {
        if (!child.running) throw new Error(`lighttpd exited: ${child.stderr}`);
        return canConnect({ port });
      },
      { timeout: 10_000, what: 'lighttpd' },
    );
    url = `http://127.0.0.1:${port}`;
  });
  after(() => scope.run());

  it('FastCGI over a Unix socket: variables, 10 MB body, error status', async () => {
    pool.behaviour = echoParams;
    for (let i = 0; i < 5; i++) {
      const r = await httpRequest(`${url}/fcgi/app.php?i=${i}`, { headers: { 'X-Test': 'lt' } });
      assert.equal(r.status, 200);
      const p = JSON.parse(r.text);
      assert.equal(p.QUERY_STRING, `i=${i}`);
      assert.equal(p.HTTP_X_TEST, 'lt');
    }
    pool.behaviour = echoBodyAfterEnd;
    const block = seededBytes(65536, 2);
    const up = await httpUpload(`${url}/fcgi/up.php`, block, 160 * 65536);
    assert.equal(up.status, 200);
    assert.equal(sha256(up.body), sha256(Buffer.concat(Array.from({ length: 160 }, () => block))));
    pool.behaviour = failWith(new ProxyError(ErrorCodes.QUEUE_FULL, 503, 'full', 2));
    const e = await httpRequest(`${url}/fcgi/x.php`);
    assert.equal(e.status, 503);
    assert.equal(e.headers['retry-after'], '2');
    assert.equal(fcgi.lines.filter((l) => l.level >= 40).length, 0, 'lighttpd sent nothing we warn about');
  });

  it('SCGI over TCP: variables and body', async () => {
    pool.behaviour = echoParams;
    const r = await httpRequest(`${url}/scgi/app?y=2`, { method: 'POST', body: 'abc' });
    assert.equal(r.status, 200);
    const p = JSON.parse(r.text);
    assert.equal(p.QUERY_STRING, 'y=2');
    assert.equal(p.CONTENT_LENGTH, '3');
  });
});
