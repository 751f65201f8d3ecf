/**
 * Request variables just under the 64 KiB default limit reach a real php-cgi. They no
 * longer fit one PARAMS record on the way to the worker, and php-cgi decodes each
 * record on its own and refuses content + padding over 65535: the daemon used to cut a
 * pair across records (or pad a 65535-byte record), php-cgi closed, the client got 502.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon } from '../helpers/daemon.js';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';

describe('params near the 64 KiB limit reach php-cgi', { timeout: 60_000 }, () => {
  const scope = new Cleanup();
  let port: number;

  before(async () => {
    const dir = makeTempDir(scope);
    port = await freePort();
    await startDaemon(scope, {
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
      pools: { php: { command: phpCommand(dir, 'large-params'), pm: 'static', max_children: 1 } },
    });
  });
  after(() => scope.run());

  /** The fixture's variables plus HTTP_X_BIG, sized so names + values total `bytes` (what max_params_bytes counts). */
  function paramsOf(bytes: number): Record<string, string> {
    const p = phpParams(PHP_FIXTURES, '/echo.php');
    let used = 0;
    for (const [k, v] of Object.entries(p)) used += k.length + v.length;
    p.HTTP_X_BIG = 'b'.repeat(bytes - used - 'HTTP_X_BIG'.length);
    return p;
  }

  for (const bytes of [65_515, 65_530, 65_535]) {
    it(`${bytes} bytes of request variables: 200 and the big header arrives whole`, async () => {
      const c = await FcgiClient.connect({ port });
      try {
        const params = paramsOf(bytes);
        c.request(1, params);
        const res = await c.response(1);
        const out = parseCgiOutput(res.stdout);
        assert.equal(out.status, 200, out.body.toString().slice(0, 300));
        const seen = JSON.parse(out.body.toString()) as { headers: Record<string, string> };
        assert.equal(seen.headers.HTTP_X_BIG, params.HTTP_X_BIG);
      } finally {
        c.close();
      }
    });
  }
});
