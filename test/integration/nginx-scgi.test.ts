/**
 * Issue acceptance (b): nginx scgi_pass → fcgi-pm SCGI listener (Unix socket, mode
 * 0660) → external pool of two php-cgi -b processes.
 */
import { join } from 'node:path';
import { statSync } from 'node:fs';
import assert from 'node:assert/strict';
import { startDaemon } from '../helpers/daemon.js';
import { scgiParams, startNginx } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { startPhpCgi } from '../helpers/php.js';
import { makeTempDir } from '../helpers/tmp.js';
import { webSuite } from '../helpers/web-suite.js';

webSuite('nginx scgi_pass → fcgi-pm (SCGI listener) → php-cgi', async (scope) => {
  const dir = makeTempDir(scope);
  await startPhpCgi(scope, join(dir, 'php1.sock'));
  await startPhpCgi(scope, join(dir, 'php2.sock'));
  const sock = join(dir, 'app.sock');
  const daemon = await startDaemon(scope, {
    listen: [{ protocol: 'scgi', address: `unix:${sock}`, pool: 'php', mode: '0660' }],
    pools: {
      php: {
        backend: 'fastcgi',
        backends: [`unix:${dir}/php1.sock`, `unix:${dir}/php2.sock`],
        max_conns_per_backend: 1,
      },
    },
    log: { level: 'info', access: true },
  });
  assert.equal(statSync(sock).mode & 0o777, 0o660, 'listener socket mode from the config');
  const ngx = await startNginx(
    scope,
    `root ${PHP_FIXTURES};
    location ~ \\.php$ {
      scgi_pass unix:${sock};
      scgi_read_timeout 30s;
      ${scgiParams()}
    }`,
  );
  return { url: ngx.url, daemon };
});
