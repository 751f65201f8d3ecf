/**
 * examples/frontends/apache-authnz-fcgi.conf against a real Apache httpd
 * (mod_authnz_fcgi, authnz provider in the authentication phase) in front of fcgi-pm:
 * /team/ asks the libfcgi authorizer, /private/ the WSGI one (TCP both: the module knows
 * no other); php-cgi serves what they allow.
 */
import { after, before, describe } from 'node:test';
import type { Daemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup } from '../helpers/scope.js';
import { authorizerChecks, startAuthorizerDaemon } from './authorizer-support.js';
import { startApache, type FrontEnd } from './servers.js';
import { exampleFile } from './templates.js';

describe('Apache mod_authnz_fcgi → fcgi-pm (examples/frontends/apache-authnz-fcgi.conf)', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let front: FrontEnd;
  let daemon: Daemon;
  before(async () => {
    const rig = await startAuthorizerDaemon(scope);
    daemon = rig.daemon;
    const port = await freePort();
    front = await startApache(
      scope,
      (serverRoot) =>
        exampleFile('frontends/apache-authnz-fcgi.conf', [
          ['/srv/fcgi-pm/apache', serverRoot],
          ['/srv/fcgi-pm/protected', rig.docRoot],
          ['127.0.0.1:8080', `127.0.0.1:${port}`],
          ['127.0.0.1:9000', `127.0.0.1:${rig.port}`],
          ['127.0.0.1:9001', `127.0.0.1:${rig.wsgiPort}`],
        ]),
      port,
    );
  });
  after(() => scope.run());

  authorizerChecks(() => ({ front, daemon }), [
    { path: '/team/', via: 'TCP', authorizer: 'libfcgi', pool: 'token-c' },
    { path: '/private/', via: 'TCP', authorizer: 'WSGI', pool: 'token-wsgi' },
  ]);
});
