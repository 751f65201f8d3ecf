/**
 * examples/frontends/haproxy-fcgi.cfg against a real HAProxy (fcgi-app, proto fcgi) in
 * front of fcgi-pm.
 */
import { freePort } from '../helpers/ports.js';
import { PHP_PUBLIC } from './examples.js';
import { frontEndSuite, startExampleDaemon } from './frontend-checks.js';
import { startHaproxy } from './servers.js';
import { exampleFile } from './templates.js';

frontEndSuite('HAProxy fcgi-app → fcgi-pm (examples/frontends/haproxy-fcgi.cfg)', async (scope, dir) => {
  const { daemon, fastcgiPort } = await startExampleDaemon(scope, dir);
  const port = await freePort();
  const conf = exampleFile('frontends/haproxy-fcgi.cfg', [
    ['bind 127.0.0.1:8080', `bind 127.0.0.1:${port}`],
    ['/srv/fcgi-pm/examples/php/public', PHP_PUBLIC],
    ['127.0.0.1:9000', `127.0.0.1:${fastcgiPort}`],
  ]);
  return { front: await startHaproxy(scope, conf, port), daemons: [daemon] };
});
