/**
 * The authorizers of examples/authorizer/, each started as fcgi-pm starts a worker (src/worker:
 * a listening Unix socket as fd 0) and asked real FastCGI authorizer requests (role
 * FCGI_AUTHORIZER) on one kept connection: token-authorizer.c built here with cc against
 * libfcgi, token_authorizer.py under bin/fcgi-pm-wsgi, auth.php under php-cgi. All three
 * must make the same decisions, and answer the responder form (FCGI_ROLE=AUTHORIZER) too.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '../../src/log/log.js';
import { judgeAuthorizerAnswer } from '../../src/protocol/authorizer.js';
import { parseCgiHead } from '../../src/protocol/cgi-response.js';
import { Role } from '../../src/protocol/fastcgi.js';
import { Worker } from '../../src/worker/worker.js';
import { FcgiClient, parseCgiOutput, phpParams, type CgiOutput } from '../helpers/fcgi-client.js';
import { PHP_CGI, REPO_ROOT } from '../helpers/paths.js';
import { scgiRequest } from '../helpers/scgi-client.js';
import { makeTempDir } from '../helpers/tmp.js';
import type { ConnectTarget } from '../helpers/wait.js';
import { makeSpec } from '../worker/helpers.js';

const EXAMPLE = join(REPO_ROOT, 'examples', 'authorizer');
const TOKENS = 'alice:tok1, bob:tok2:/public/';
const WSGI = ['/usr/bin/python3', join(REPO_ROOT, 'bin', 'fcgi-pm-wsgi'), '--path', EXAMPLE];

interface Case {
  what: string;
  authorization?: string;
  uri: string;
  status: number;
  user?: string;
  body?: string;
  /** More request variables. */
  params?: Record<string, string>;
}

const CASES: Case[] = [
  { what: 'a known token', authorization: 'Bearer tok1', uri: '/private/report?x=1', status: 200, user: 'alice' },
  { what: 'a scheme in lower case, blanks around the token', authorization: 'bearer  tok2 ', uri: '/public/a', status: 200, user: 'bob' },
  { what: 'a user outside his prefix', authorization: 'Bearer tok2', uri: '/private/report', status: 403, body: '403 Forbidden: bob may only use /public/\n' },
  { what: 'an encoded path for a user with a prefix', authorization: 'Bearer tok2', uri: '/public/%2e%2e/private', status: 403, body: '403 Forbidden: bob may only use /public/\n' },
  { what: 'an unknown token', authorization: 'Bearer tok3', uri: '/private/report', status: 401, body: '401 Unauthorized: a valid bearer token is needed\n' },
  { what: 'a token with more after it', authorization: 'Bearer tok1 tok2', uri: '/', status: 401, body: '401 Unauthorized: a valid bearer token is needed\n' },
  { what: 'another scheme', authorization: 'Basic dG9rMQ==', uri: '/', status: 401, body: '401 Unauthorized: a valid bearer token is needed\n' },
  { what: 'no Authorization', uri: '/', status: 401, body: '401 Unauthorized: a valid bearer token is needed\n' },
  {
    what: 'a token listed in a request variable named AUTH_TOKENS',
    authorization: 'Bearer evil',
    params: { AUTH_TOKENS: 'mallory:evil' },
    uri: '/',
    status: 401,
    body: '401 Unauthorized: a valid bearer token is needed\n',
  },
];

/**
 * An authorizer's variables: those of the request being authorized (its SCRIPT_FILENAME
 * too) less CONTENT_LENGTH, PATH_INFO, PATH_TRANSLATED and SCRIPT_NAME (FastCGI 6.3).
 */
function authorizerParams(c: Case, extra: Record<string, string>): Record<string, string> {
  const p = phpParams(EXAMPLE, c.uri, { ...(c.authorization === undefined ? {} : { HTTP_AUTHORIZATION: c.authorization }), ...c.params, ...extra });
  for (const k of ['CONTENT_LENGTH', 'CONTENT_TYPE', 'SCRIPT_NAME']) delete p[k];
  return p;
}

/** The example as fcgi-pm spawns a worker; resolves with its socket once it accepts. */
async function startExample(t: TestContext, dir: string, command: string[]): Promise<ConnectTarget> {
  const run = join(dir, 'run');
  mkdirSync(run, { mode: 0o700 });
  const env = { PATH: '/usr/bin:/bin', AUTH_TOKENS: TOKENS, PHP_FCGI_CHILDREN: '0', PYTHONDONTWRITEBYTECODE: '1' };
  const w = Worker.spawn(makeSpec(run, command, { env }), silentLogger(), 1);
  t.after(async () => void (await w.stop()));
  await once(w, 'ready');
  return { path: (w.address as { path: string }).path };
}

/** How a request is put: 'authorizer' as the protocol's authorizer request, 'form' the responder form, 'responder' plain. */
type Ask = (params: Record<string, string>, kind: 'authorizer' | 'form' | 'responder') => Promise<CgiOutput & { raw: Buffer }>;

/** FastCGI on one kept connection: role FCGI_AUTHORIZER, or a responder request. */
async function fastcgiAsk(t: TestContext, target: ConnectTarget): Promise<Ask> {
  const client = await FcgiClient.connect(target);
  t.after(() => client.close());
  let id = 0;
  return async (params, kind) => {
    const role = kind === 'authorizer' ? Role.Authorizer : Role.Responder;
    client.request(++id, kind === 'form' ? { ...params, FCGI_ROLE: 'AUTHORIZER' } : params, undefined, { role });
    const r = await client.response(id);
    assert.equal(r.protocolStatus, 0, 'FCGI_REQUEST_COMPLETE');
    return { ...parseCgiOutput(r.stdout), raw: r.stdout };
  };
}

/** SCGI has no roles: an authorizer request is always the responder form. */
function scgiAsk(target: ConnectTarget): Ask {
  return (params, kind) => scgiRequest(target, kind === 'responder' ? params : { ...params, FCGI_ROLE: 'AUTHORIZER' });
}

/** Every case as an authorizer request, then the responder form, then a plain responder request. */
async function checkDecisions(ask: Ask, extra: Record<string, string> = {}): Promise<void> {
  for (const c of CASES) {
    const out = await ask(authorizerParams(c, extra), 'authorizer');
    assert.equal(out.status, c.status, c.what);
    assert.equal(out.header('Variable-REMOTE_USER'), c.user, c.what);
    if (c.status === 200) {
      assert.equal(out.body.length, 0, `${c.what}: the head is the whole answer`);
      // What fcgi-pm's upstream makes of it: a grant it acts on, with both variables.
      assert.deepEqual(judgeAuthorizerAnswer(parseCgiHead(out.raw)), { kind: 'allow', variables: [['REMOTE_USER', c.user], ['AUTH_TYPE', 'Bearer']] }, c.what);
    } else {
      assert.equal(out.body.toString(), c.body, c.what);
    }
    assert.equal(out.header('WWW-Authenticate'), c.status === 401 ? 'Bearer realm="fcgi-pm"' : undefined, c.what);
  }
  const form = await ask(authorizerParams(CASES[0]!, extra), 'form');
  assert.equal(form.status, 200, 'the responder form with FCGI_ROLE=AUTHORIZER');
  assert.equal(form.header('Variable-REMOTE_USER'), 'alice');
  const plain = await ask(authorizerParams(CASES[0]!, extra), 'responder');
  assert.equal(plain.status, 500, 'a plain responder request is a configuration mistake: denied');
  assert.equal(plain.body.toString(), 'this program answers FastCGI authorizer requests only\n');
}

/** A malformed AUTH_TOKENS stops the program before it serves, saying which entry. */
function checkBadTokensRefused(command: string[]): void {
  const r = spawnSync(command[0]!, command.slice(1), {
    env: { PATH: '/usr/bin:/bin', AUTH_TOKENS: 'alice:tok1,carol', PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.notEqual(r.status, 0, r.stderr);
  assert.match(r.stderr, /AUTH_TOKENS: .*carol.* is not NAME:TOKEN or NAME:TOKEN:PATH_PREFIX/);
}

function missingForC(): string | undefined {
  try {
    execFileSync('cc', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'no C compiler (cc); scripts/install-test-deps.sh installs build-essential';
  }
  return existsSync('/usr/include/fcgiapp.h') ? undefined : 'no /usr/include/fcgiapp.h; scripts/install-test-deps.sh installs libfcgi-dev';
}

test('token-authorizer.c (libfcgi) built with cc answers FastCGI authorizer requests', { skip: missingForC(), timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-authz-c-');
  const bin = join(dir, 'token-authorizer');
  execFileSync('cc', ['-O2', '-Wall', '-Werror', '-o', bin, join(EXAMPLE, 'token-authorizer.c'), '-lfcgi'], { stdio: 'pipe' });
  await checkDecisions(await fastcgiAsk(t, await startExample(t, dir, [bin])));
  checkBadTokensRefused([bin]);
});

test('token_authorizer.py under bin/fcgi-pm-wsgi answers FastCGI authorizer requests', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-authz-py-');
  const command = [...WSGI, 'token_authorizer:application'];
  await checkDecisions(await fastcgiAsk(t, await startExample(t, dir, command)));
  checkBadTokensRefused(command);
});

test('token_authorizer.py under bin/fcgi-pm-wsgi --scgi answers the responder form', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-authz-scgi-');
  await checkDecisions(scgiAsk(await startExample(t, dir, [...WSGI, '--scgi', 'token_authorizer:application'])));
});

test('auth.php under php-cgi answers FastCGI authorizer requests', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-authz-php-');
  // php-cgi runs the script SCRIPT_FILENAME names, whichever role the request has.
  await checkDecisions(await fastcgiAsk(t, await startExample(t, dir, [PHP_CGI])), { SCRIPT_FILENAME: join(EXAMPLE, 'auth.php') });
});
