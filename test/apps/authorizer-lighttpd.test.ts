/**
 * examples/frontends/lighttpd-authorizer.conf against a real lighttpd (mod_fastcgi,
 * "mode" => "authorizer") in front of fcgi-pm: /private/ asks the WSGI authorizer over
 * the Unix socket, /team/ the libfcgi one over TCP; php-cgi serves what they allow.
 */
import { after, before, describe } from 'node:test';
import type { Daemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { authorizerChecks, startAuthorizerDaemon } from './authorizer-support.js';
import { startLighttpd, type FrontEnd } from './servers.js';
import { exampleFile } from './templates.js';

describe('lighttpd "mode" => "authorizer" → fcgi-pm (examples/frontends/lighttpd-authorizer.conf)', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let front: FrontEnd;
  let daemon: Daemon;
  before(async () => {
    const rig = await startAuthorizerDaemon(scope);
    daemon = rig.daemon;
    const port = await freePort();
    const conf = exampleFile('frontends/lighttpd-authorizer.conf', [
      ['/srv/fcgi-pm/protected', rig.docRoot],
      ['/run/fcgi-pm/app.sock', rig.socket],
      ['"port" => 9000', `"port" => ${rig.port}`],
      ['server.port          = 8080', `server.port = ${port}`],
    ]);
    front = await startLighttpd(scope, conf, port);
  });
  after(() => scope.run());

  authorizerChecks(() => ({ front, daemon }), [
    { path: '/private/', via: 'Unix socket', authorizer: 'WSGI', pool: 'token-wsgi' },
    { path: '/team/', via: 'TCP', authorizer: 'libfcgi', pool: 'token-c' },
  ]);
});
