/**
 * examples/frontends/nginx-*.conf against a real nginx: fastcgi_pass and scgi_pass to
 * one fcgi-pm, and an upstream of two fcgi-pm daemons (both used; one stopped, the
 * other takes every request).
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { httpRequest } from '../helpers/http-client.js';
import { freePort } from '../helpers/ports.js';
import { PHP_PUBLIC } from './examples.js';
import { frontEndSuite, startExampleDaemon } from './frontend-checks.js';
import { startNginxSite } from './servers.js';
import { exampleFile } from './templates.js';
import { waitFor } from '../helpers/wait.js';

frontEndSuite('nginx fastcgi_pass → fcgi-pm (examples/frontends/nginx-fastcgi.conf)', async (scope, dir) => {
  const { daemon, fastcgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  const site = exampleFile('frontends/nginx-fastcgi.conf', [
    ['listen 127.0.0.1:8080', `listen 127.0.0.1:${port}`],
    ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
    ['127.0.0.1:9000', `127.0.0.1:${fastcgiPort}`],
  ]);
  return { front: await startNginxSite(scope, site, port), daemons: [daemon] };
});

frontEndSuite('nginx scgi_pass → fcgi-pm (examples/frontends/nginx-scgi.conf)', async (scope, dir) => {
  const { daemon, scgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  const site = exampleFile('frontends/nginx-scgi.conf', [
    ['listen 127.0.0.1:8080', `listen 127.0.0.1:${port}`],
    ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
    ['127.0.0.1:9100', `127.0.0.1:${scgiPort}`],
  ]);
  return { front: await startNginxSite(scope, site, port), daemons: [daemon] };
});

frontEndSuite(
  'nginx upstream of two fcgi-pm daemons (examples/frontends/nginx-upstream.conf)',
  async (scope, dir) => {
    const a = await startExampleDaemon(scope, dir, 'a');
    const b = await startExampleDaemon(scope, dir, 'b');
    const port = await freePort();
    const site = exampleFile('frontends/nginx-upstream.conf', [
      ['listen 127.0.0.1:8080', `listen 127.0.0.1:${port}`],
      ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
      ['127.0.0.1:9000', `127.0.0.1:${a.fastcgiPort}`],
      ['127.0.0.1:9001', `127.0.0.1:${b.fastcgiPort}`],
    ]);
    return { front: await startNginxSite(scope, site, port), daemons: [a.daemon, b.daemon] };
  },
  {
    extra(get) {
      it('both daemons served requests', () => {
        const counts = get().daemons.map((d) => d.logs.filter((l) => l.status === 200 && JSON.stringify(l).includes('.php')).length);
        assert.ok(counts.every((n) => n > 0), `requests per daemon: ${counts.join(', ')}`);
      });

      it('with one daemon stopped, every request is still answered (by the other)', async () => {
        const [a, b] = get().daemons;
        const exit = await a!.stop();
        assert.equal(exit.code, 0, a!.dump());
        const before = b!.mark();
        for (let i = 0; i < 10; i++) {
          const r = await httpRequest(`${get().front.url}/echo.php?after=${i}`);
          assert.equal(r.status, 200, r.text.slice(0, 200));
          assert.equal(JSON.parse(r.text).get.after, String(i));
        }
        // Access lines follow the responses through the daemon's stdout: wait for them.
        const served = (): number => b!.logsSince(before).filter((l) => l.status === 200 && JSON.stringify(l).includes('after=')).length;
        await waitFor(() => served() >= 10, { timeout: 5000, what: 'access lines' }).catch(() => undefined);
        assert.equal(served(), 10, b!.dump(before));
      });
    },
  },
);
