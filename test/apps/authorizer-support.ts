/**
 * Front ends that send FastCGI authorizer requests (lighttpd, Apache mod_authnz_fcgi) in
 * front of fcgi-pm from examples/frontends/fcgi-pm-authorizer.yaml: the WSGI token
 * authorizer behind the Unix socket listener and a second TCP one, the libfcgi one (built
 * here with cc) behind the first TCP one, php-cgi for the pages they protect. The checks every such front end passes.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { Cleanup, type Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { worldReadableDir } from '../helpers/world-readable.js';
import { exampleConfig, PYTHON } from './examples.js';
import type { FrontEnd } from './servers.js';

const AUTHORIZERS = join(REPO_ROOT, 'examples', 'authorizer');

/** The protected page: what the responder sees of the request the authorizer let through. */
const WHOAMI = `<?php
header('Content-Type: application/json');
echo json_encode(['user' => $_SERVER['REMOTE_USER'] ?? null, 'auth_type' => $_SERVER['AUTH_TYPE'] ?? null, 'script' => $_SERVER['SCRIPT_NAME'] ?? null]);
`;

export interface AuthorizerRig {
  daemon: Daemon;
  /** The Unix socket listener (WSGI authorizer). */
  socket: string;
  /** The TCP listener's port (libfcgi authorizer). */
  port: number;
  /** The second TCP listener's port (WSGI authorizer, for Apache). */
  wsgiPort: number;
  /** Pages at /private/whoami.php and /team/whoami.php; readable by Apache's nobody. */
  docRoot: string;
}

export async function startAuthorizerDaemon(scope: Scope): Promise<AuthorizerRig> {
  const dir = makeTempDir(scope, 'fpm-azf-');
  const bin = join(dir, 'token-authorizer');
  execFileSync('cc', ['-O2', '-o', bin, join(AUTHORIZERS, 'token-authorizer.c'), '-lfcgi'], { stdio: 'pipe' });
  const pages = join(makeTempDir(scope, 'fpm-azd-'), 'protected');
  for (const sub of ['private', 'team']) {
    mkdirSync(join(pages, sub), { recursive: true });
    writeFileSync(join(pages, sub, 'whoami.php'), WHOAMI);
  }
  const docRoot = worldReadableDir(scope, pages);
  const socket = join(dir, 'app.sock');
  const port = await freePort();
  const wsgiPort = await freePort();
  const daemon = await startDaemon(
    scope,
    exampleConfig('frontends/fcgi-pm-authorizer.yaml', {
      listen: { 'unix:/run/fcgi-pm/app.sock': `unix:${socket}`, '127.0.0.1:9000': `127.0.0.1:${port}`, '127.0.0.1:9001': `127.0.0.1:${wsgiPort}` },
      pools: {
        'token-wsgi': { command: [PYTHON, join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--path', AUTHORIZERS, 'token_authorizer:application'], env: { PYTHONDONTWRITEBYTECODE: '1' } },
        'token-c': { command: [bin] },
      },
    }),
  );
  return { daemon, socket, port, wsgiPort, docRoot };
}

export interface Protected {
  /** URL prefix the front end protects, e.g. /private/. */
  path: string;
  /** How the front end reaches fcgi-pm, for test names. */
  via: string;
  authorizer: string;
  /** fcgi-pm pool that answers its authorizer requests. */
  pool: string;
}

/** fcgi-pm as above, then the front end `startFront` starts on `port`; every check under each of `prefixes`. */
export function authorizerSuite(name: string, startFront: (scope: Scope, rig: AuthorizerRig, port: number) => Promise<FrontEnd>, prefixes: Protected[]): void {
  describe(name, { timeout: 90_000 }, () => {
    const scope = new Cleanup();
    let front: FrontEnd;
    let daemon: Daemon;
    before(async () => {
      const rig = await startAuthorizerDaemon(scope);
      daemon = rig.daemon;
      front = await startFront(scope, rig, await freePort());
    });
    after(() => scope.run());
    authorizerChecks(() => ({ front, daemon }), prefixes);
  });
}

/** Allowed, outside the user's prefix, wrong and missing tokens, under each of `prefixes`. */
function authorizerChecks(get: () => { front: FrontEnd; daemon: Daemon }, prefixes: Protected[]): void {
  for (const { path, via, authorizer, pool } of prefixes) {
    const url = (): string => `${get().front.url}${path}whoami.php`;
    const ask = (token?: string) => httpRequest(url(), { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });

    it(`${via}: a known token reaches the page, the ${authorizer} authorizer's Variable-REMOTE_USER and AUTH_TYPE in PHP's $_SERVER`, async () => {
      const since = get().daemon.mark();
      const r = await ask('tok1');
      assert.equal(r.status, 200, `${r.text.slice(0, 300)}\n${get().front.log().slice(-2000)}\n${get().daemon.dump()}`);
      assert.deepEqual(JSON.parse(r.text), { user: 'alice', auth_type: 'Bearer', script: `${path}whoami.php` });
      // Two requests in fcgi-pm's access log: the authorizer's, then the page's.
      await get().daemon.waitForLog((l) => l.status === 200 && l.pool === pool, { since, what: `the authorizer request to pool ${pool}` });
      await get().daemon.waitForLog((l) => l.status === 200 && l.pool === 'php', { since, what: 'the page request to pool php' });
    });

    it(`${via}: a token outside its path prefix gets the ${authorizer} authorizer's 403 and body`, async () => {
      const r = await ask('tok2');
      assert.equal(r.status, 403);
      assert.equal(r.text, '403 Forbidden: bob may only use /public/\n');
    });

    it(`${via}: a wrong or missing token gets the ${authorizer} authorizer's 401, WWW-Authenticate and body`, async () => {
      for (const token of ['nope', undefined]) {
        const r = await ask(token);
        assert.equal(r.status, 401, String(token));
        assert.equal(r.headers['www-authenticate'], 'Bearer realm="fcgi-pm"');
        assert.equal(r.text, '401 Unauthorized: a valid bearer token is needed\n');
      }
    });
  }

  it('fcgi-pm warned about nothing', () => {
    const d = get().daemon;
    assert.deepEqual(d.warningsSince(0), [], d.dump());
  });
}
