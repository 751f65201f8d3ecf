/**
 * examples/frontends/lighttpd-{fastcgi,scgi}.conf against a real lighttpd (mod_fastcgi,
 * mod_scgi) in front of fcgi-pm.
 */
import { freePort } from '../helpers/ports.js';
import { PHP_PUBLIC } from './examples.js';
import { frontEndSuite, startExampleDaemon } from './frontend-checks.js';
import { startLighttpd } from './servers.js';
import { exampleFile } from './templates.js';

frontEndSuite('lighttpd mod_fastcgi → fcgi-pm (examples/frontends/lighttpd-fastcgi.conf)', async (scope, dir) => {
  const { daemon, fastcgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  const conf = exampleFile('frontends/lighttpd-fastcgi.conf', [
    ['server.port          = 8080', `server.port          = ${port}`],
    ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
    ['"port" => 9000', `"port" => ${fastcgiPort}`],
  ]);
  return { front: await startLighttpd(scope, conf, port), daemons: [daemon] };
});

frontEndSuite('lighttpd mod_scgi → fcgi-pm (examples/frontends/lighttpd-scgi.conf)', async (scope, dir) => {
  const { daemon, scgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  const conf = exampleFile('frontends/lighttpd-scgi.conf', [
    ['server.port          = 8080', `server.port          = ${port}`],
    ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
    ['"port" => 9100', `"port" => ${scgiPort}`],
  ]);
  return { front: await startLighttpd(scope, conf, port), daemons: [daemon] };
});
