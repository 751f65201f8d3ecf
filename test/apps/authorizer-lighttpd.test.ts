/**
 * examples/frontends/lighttpd-authorizer.conf against a real lighttpd (mod_fastcgi,
 * "mode" => "authorizer") in front of fcgi-pm: /private/ asks the WSGI authorizer over
 * the Unix socket, /team/ the libfcgi one over TCP; php-cgi serves what they allow.
 */
import { authorizerSuite } from './authorizer-support.js';
import { startLighttpd } from './servers.js';
import { exampleFile } from './templates.js';

authorizerSuite(
  'lighttpd "mode" => "authorizer" → fcgi-pm (examples/frontends/lighttpd-authorizer.conf)',
  (scope, rig, port) =>
    startLighttpd(
      scope,
      exampleFile('frontends/lighttpd-authorizer.conf', [
        ['/srv/fcgi-pm/protected', rig.docRoot],
        ['/run/fcgi-pm/app.sock', rig.socket],
        ['"port" => 9000', `"port" => ${rig.port}`],
        ['server.port          = 8080', `server.port = ${port}`],
      ]),
      port,
    ),
  [
    { path: '/private/', via: 'Unix socket', authorizer: 'WSGI', pool: 'token-wsgi' },
    { path: '/team/', via: 'TCP', authorizer: 'libfcgi', pool: 'token-c' },
  ],
);
