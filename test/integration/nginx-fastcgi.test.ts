/**
 * Issue acceptance (a): nginx fastcgi_pass (kept-alive upstream connections) →
 * fcgi-pm FastCGI listener → external pool of two php-cgi -b processes.
 */
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { startNginxKeptAlive } from '../helpers/nginx.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { webSuite } from '../helpers/web-suite.js';

webSuite('nginx fastcgi_pass → fcgi-pm (FastCGI listener) → php-cgi', async (scope) => {
  const dir = makeTempDir(scope);
  await startPhpCgi(scope, join(dir, 'php1.sock'));
  await startPhpCgi(scope, join(dir, 'php2.sock'));
  const port = await freePort();
  const daemon = await startDaemon(scope, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'php' }],
    pools: {
      php: {
        backend: 'fastcgi',
        backends: [`unix:${dir}/php1.sock`, `unix:${dir}/php2.sock`],
        // One php-cgi process serves one connection at a time.
        max_conns_per_backend: 1,
      },
    },
    log: { level: 'info', access: true },
  });
  const ngx = await startNginxKeptAlive(scope, port, { keepalive: 16, readTimeout: '30s' });
  return { url: ngx.url, daemon };
});
