/**
 * examples/frontends/apache-proxy-fcgi.conf against a real Apache httpd (Debian's
 * apache2 binary, mod_proxy_fcgi) in front of fcgi-pm.
 */
import { freePort } from '../helpers/ports.js';
import { PHP_PUBLIC } from './examples.js';
import { frontEndSuite, startExampleDaemon } from './frontend-checks.js';
import { startApache, worldReadableDocRoot } from './servers.js';
import { exampleFile } from './templates.js';

frontEndSuite('Apache mod_proxy_fcgi → fcgi-pm (examples/frontends/apache-proxy-fcgi.conf)', async (scope, dir) => {
  const { daemon, fastcgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  // Apache's children run as nobody and must be able to stat the scripts.
  const docRoot = worldReadableDocRoot(scope, PHP_PUBLIC);
  const front = await startApache(
    scope,
    (serverRoot) =>
      exampleFile('frontends/apache-proxy-fcgi.conf', [
        ['/srv/fcgi-pm/apache', serverRoot],
        ['/srv/fcgi-pm/examples/php/public', docRoot],
        ['127.0.0.1:8080', `127.0.0.1:${port}`],
        ['127.0.0.1:9000', `127.0.0.1:${fastcgiPort}`],
      ]),
    port,
  );
  return { front, daemons: [daemon], docRoot };
});
