/**
 * The authorizers of examples/authorizer/ as `authorizer:` pools spawned by fcgi-pm in
 * front of php-cgi pools: token_authorizer.py under bin/fcgi-pm-wsgi (FastCGI, and SCGI
 * where it gets the responder form), token-authorizer.c built with libfcgi, and auth.php
 * under php-cgi named with `script`. Asked through the HTTP listener and through nginx
 * over SCGI: a known token reaches PHP as REMOTE_USER, others get the example's 401 or 403.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { scgiParams, startNginx, type Nginx } from '../helpers/nginx.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';

const EXAMPLE = join(REPO_ROOT, 'examples', 'authorizer');
const PAGE = join(REPO_ROOT, 'test', 'fixtures', 'authorizer', 'page.php');
const TOKENS = 'alice:tok1,bob:tok2:/public/';
const WSGI = ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--path', EXAMPLE];
const HAVE_C = existsSync('/usr/bin/cc') && existsSync('/usr/include/fcgiapp.h');

/** Guarded pool → its authorizer pool's settings. */
function authorizers(bin: string, dir: string): Record<string, Record<string, unknown>> {
  const env = { AUTH_TOKENS: TOKENS, PYTHONDONTWRITEBYTECODE: '1' };
  return {
    py: { command: [...WSGI, 'token_authorizer:application'], env },
    scgi: { backend: 'scgi', command: [...WSGI, '--scgi', 'token_authorizer:application'], env },
    php: { command: phpCommand(dir, 'authz-example-php'), script: join(EXAMPLE, 'auth.php'), env },
    ...(HAVE_C ? { c: { command: [bin], env } } : {}),
  };
}

describe('examples/authorizer as authorizer pools in front of php-cgi', { timeout: 120_000 }, () => {
  const scope = new Cleanup();
  const http: Record<string, string> = {};
  let nginx: Nginx;
  let kinds: string[];

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-authz-ex-');
    const bin = join(dir, 'token-authorizer');
    if (HAVE_C) execFileSync('cc', ['-O2', '-o', bin, join(EXAMPLE, 'token-authorizer.c'), '-lfcgi'], { stdio: 'pipe' });
    const root = join(dir, 'www');
    const auths = authorizers(bin, dir);
    kinds = Object.keys(auths);
    const pools: Record<string, unknown> = {};
    const listen: Array<Record<string, unknown>> = [];
    for (const kind of kinds) {
      mkdirSync(join(root, kind), { recursive: true });
      copyFileSync(PAGE, join(root, kind, 'page.php'));
      pools[`auth_${kind}`] = { max_children: 2, ...auths[kind] };
      pools[`app_${kind}`] = { command: phpCommand(dir, `authz-example-app-${kind}`), max_children: 2, authorizer: `auth_${kind}` };
      const port = await freePort();
      http[kind] = `http://127.0.0.1:${port}`;
      listen.push({ protocol: 'http', address: `127.0.0.1:${port}`, pool: `app_${kind}`, document_root: root });
    }
    const sock = join(dir, 'scgi.sock');
    listen.push({ protocol: 'scgi', address: `unix:${sock}`, pool: 'app_py' });
    await startDaemon(scope, { listen, pools }, { dir });
    nginx = await startNginx(scope, `root ${root};\n    location /py/ {\n      ${scgiParams()}\n      scgi_pass unix:${sock};\n    }`);
  });
  after(() => scope.run());

  const checks = (what: string, url: () => string, uri: string): void => {
    it(`${what}: a known token reaches PHP as REMOTE_USER; an unknown one gets 401, a path outside a user's prefix 403`, async () => {
      const ok = await httpRequest(`${url()}${uri}`, { headers: { authorization: 'Bearer tok1' } });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(JSON.parse(ok.text).remote_user, 'alice');
      const unknown = await httpRequest(`${url()}${uri}`, { headers: { authorization: 'Bearer tok3' } });
      assert.equal(unknown.status, 401);
      assert.equal(unknown.headers['www-authenticate'], 'Bearer realm="fcgi-pm"');
      assert.equal(unknown.text, '401 Unauthorized: a valid bearer token is needed\n');
      const outside = await httpRequest(`${url()}${uri}`, { headers: { authorization: 'Bearer tok2' } });
      assert.equal(outside.status, 403);
      assert.equal(outside.text, '403 Forbidden: bob may only use /public/\n');
    });
  };
  checks('token_authorizer.py (fcgi-pm-wsgi, FastCGI), HTTP listener', () => http.py!, '/py/page.php');
  checks('token_authorizer.py (fcgi-pm-wsgi --scgi), HTTP listener', () => http.scgi!, '/scgi/page.php');
  checks('auth.php (php-cgi, script), HTTP listener', () => http.php!, '/php/page.php');
  checks('token_authorizer.py (fcgi-pm-wsgi, FastCGI), nginx over SCGI', () => nginx.url, '/py/page.php');
  if (HAVE_C) checks('token-authorizer.c (libfcgi), HTTP listener', () => http.c!, '/c/page.php');
});
