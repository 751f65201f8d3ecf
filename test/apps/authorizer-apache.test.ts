/**
 * examples/frontends/apache-authnz-fcgi.conf against a real Apache httpd
 * (mod_authnz_fcgi, authnz providers in the authentication phase) in front of fcgi-pm:
 * /team/ asks the libfcgi authorizer, /private/ the WSGI one (TCP both: the module knows
 * no other); php-cgi serves what they allow.
 */
import { authorizerSuite } from './authorizer-support.js';
import { startApache } from './servers.js';
import { exampleFile } from './templates.js';

authorizerSuite(
  'Apache mod_authnz_fcgi → fcgi-pm (examples/frontends/apache-authnz-fcgi.conf)',
  (scope, rig, port) =>
    startApache(
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
    ),
  [
    { path: '/team/', via: 'TCP', authorizer: 'libfcgi', pool: 'token-c' },
    { path: '/private/', via: 'TCP', authorizer: 'WSGI', pool: 'token-wsgi' },
  ],
);
