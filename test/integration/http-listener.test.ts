/**
 * Issue acceptance (c): fcgi-pm's own HTTP listener, no nginx in front, serving PHP
 * files from document_root through an external pool of php-cgi -b processes.
 */
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { startPhpCgi } from '../helpers/php.js';
import { freePort } from '../helpers/ports.js';
import { makeTempDir } from '../helpers/tmp.js';
import { webSuite } from '../helpers/web-suite.js';

webSuite('HTTP client → fcgi-pm (HTTP listener) → php-cgi', async (scope) => {
  const dir = makeTempDir(scope);
  await startPhpCgi(scope, join(dir, 'php1.sock'));
  await startPhpCgi(scope, join(dir, 'php2.sock'));
  const port = await freePort();
  const daemon = await startDaemon(scope, {
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: PHP_FIXTURES, index: 'index.php' }],
    pools: {
      php: {
        backend: 'fastcgi',
        backends: [`unix:${dir}/php1.sock`, `unix:${dir}/php2.sock`],
        max_conns_per_backend: 1,
      },
    },
    log: { level: 'info', access: true },
  });
  return { url: `http://127.0.0.1:${port}`, daemon };
});
