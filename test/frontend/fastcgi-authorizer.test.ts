/**
 * FastCGI authorizer requests (role FCGI_AUTHORIZER) on the FastCGI listener of a real
 * daemon, from a raw record-level client: php-cgi pools play the role natively; the
 * listener's authorizer_pool takes them (changed by a reload), its pool the responder
 * requests. A grant's body is dropped and a steering Variable- fails it; a request with a
 * body is refused before any worker sees it, the filter role is refused, and the
 * connection serves on after both.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ErrorCodes } from '../../src/errors.js';
import { FCGI_KEEP_CONN, ProtocolStatus, RecordType, Role, encodeBeginRequest } from '../../src/protocol/fastcgi.js';
import { FcgiClient, paramsRecords, parseCgiOutput, requestRecords, stdinRecords } from '../helpers/fcgi-client.js';
import { freePort } from '../helpers/ports.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { Cleanup } from '../helpers/scope.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';
import { phpParams } from '../fixtures/upstream/sink.js';
import { opsDaemon, type OpsDaemon } from '../ops/helpers.js';

const AUTH_PHP = join(REPO_ROOT, 'examples', 'authorizer', 'auth.php');

// Says which pool ran it; as an authorizer it grants with that name and writes a body the grant must not carry.
const POOL_PHP = `<?php
$pool = getenv('POOL_NAME');
if (($_SERVER['FCGI_ROLE'] ?? '') === 'AUTHORIZER') {
  file_put_contents(getenv('CALLS'), "$pool\\n", FILE_APPEND);
  header("Variable-SERVED_BY: $pool");
  header('Content-Length: 12');
  echo 'dropped body';
  return;
}
echo $pool;
`;

describe('FastCGI authorizer requests on the FastCGI listener', { timeout: 90_000 }, () => {
  const scope = new Cleanup();
  let ops: OpsDaemon;
  let dir = '';
  let port = 0;
  let phpPort = 0;
  let vhostsPort = 0;
  let calls = '';

  const config = (authorizerPool: string): Record<string, unknown> => {
    const pool = (name: string, env: Record<string, string> = {}) => ({ command: phpCommand(dir, `authz-${name}`), pm: 'ondemand', max_children: 1, env: { POOL_NAME: name, CALLS: calls, ...env } });
    return {
      listen: [
        { protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app', authorizer_pool: authorizerPool },
        // A listener of its own for a php authorizer, which runs the file SCRIPT_FILENAME names.
        { protocol: 'fastcgi', address: `127.0.0.1:${phpPort}`, pool: 'authz', params: { SCRIPT_FILENAME: AUTH_PHP } },
        { protocol: 'fastcgi', address: `127.0.0.1:${vhostsPort}`, vhosts: true, authorizer_pool: 'authz' },
      ],
      pools: { app: pool('app'), authz: pool('authz', { AUTH_TOKENS: 'alice:tok1' }), other: pool('other') },
      vhosts: { dir: join(dir, 'sites'), defaults: pool('site') },
    };
  };

  before(async () => {
    dir = makeTempDir(scope, 'fpm-fauthz-');
    writeFileSync(join(dir, 'pool.php'), POOL_PHP);
    // Says it started, then grants once the test lets it go.
    writeFileSync(join(dir, 'wait.php'), `<?php file_put_contents(getenv('CALLS'), "waiting\\n", FILE_APPEND);
for ($i = 0; $i < 200 && !file_exists('${join(dir, 'go')}'); $i++) usleep(50000);
header('Variable-REMOTE_USER: late');`);
    writeFileSync(join(dir, 'steer.php'), "<?php header('Variable-SCRIPT_FILENAME: /etc/passwd'); header('Variable-REMOTE_USER: mallory');");
    calls = join(dir, 'calls.txt');
    writeFileSync(calls, '');
    port = await freePort();
    phpPort = await freePort();
    vhostsPort = await freePort();
    mkdirSync(join(dir, 'sites'));
    writeFileSync(join(dir, 'sites', 'site.yaml'), `names: [site.test]\ndocument_root: ${dir}\n`);
    ops = await opsDaemon(scope, config('authz'), { dir });
  });
  after(() => scope.run());

  const authCalls = (): string[] => readFileSync(calls, 'utf8').split('\n').filter((l) => l !== '');

  async function connect(to = port): Promise<FcgiClient> {
    const c = await FcgiClient.connect({ host: '127.0.0.1', port: to });
    scope.after(() => c.close());
    return c;
  }

  /** BEGIN_REQUEST and PARAMS only, no STDIN record at all: what Apache's mod_authnz_fcgi sends. */
  function askAuthorizer(c: FcgiClient, id: number, params: Record<string, string>): void {
    c.sendTogether([encodeBeginRequest(id, Role.Authorizer, FCGI_KEEP_CONN), ...paramsRecords(id, params)]);
  }

  it('a grant from php-cgi: 200, the Variable- headers, no body and no Content-Length, then END_REQUEST', async () => {
    const c = await connect();
    askAuthorizer(c, 1, phpParams(dir, 'x.php', { SCRIPT_FILENAME: AUTH_PHP, HTTP_AUTHORIZATION: 'Bearer tok1', REQUEST_URI: '/private/a' }));
    const r = await c.response(1);
    assert.equal(r.protocolStatus, ProtocolStatus.RequestComplete);
    const out = parseCgiOutput(r.stdout);
    assert.equal(out.status, 200, r.stdout.toString('latin1'));
    assert.equal(out.header('Variable-REMOTE_USER'), 'alice');
    assert.equal(out.header('Variable-AUTH_TYPE'), 'Bearer');
    assert.equal(out.header('Content-Length'), undefined);
    assert.equal(out.body.length, 0);
    // The head, the empty STDOUT and END_REQUEST; nothing else for this request.
    const types = c.records.filter((x) => x.requestId === 1).map((x) => x.type);
    assert.deepEqual(types.slice(-2), [RecordType.Stdout, RecordType.EndRequest]);
    assert.equal(c.records.filter((x) => x.requestId === 1 && x.type === RecordType.Stdout && x.content.length === 0).length, 1);
  });

  it('a deny from php-cgi goes to the client as written: 401, WWW-Authenticate and its body', async () => {
    const c = await connect();
    // Here with the empty STDIN record lighttpd sends: it is no body.
    c.request(1, phpParams(dir, 'x.php', { SCRIPT_FILENAME: AUTH_PHP, HTTP_AUTHORIZATION: 'Bearer wrong' }), undefined, { role: Role.Authorizer });
    const out = parseCgiOutput((await c.response(1)).stdout);
    assert.equal(out.status, 401);
    assert.equal(out.header('WWW-Authenticate'), 'Bearer realm="fcgi-pm"');
    assert.equal(out.body.toString(), '401 Unauthorized: a valid bearer token is needed\n');
  });

  it('a php authorizer on a listener whose params name its script: the request\'s own SCRIPT_FILENAME does not run', async () => {
    const c = await connect(phpPort);
    const before = authCalls().length;
    askAuthorizer(c, 1, phpParams(dir, 'pool.php', { HTTP_AUTHORIZATION: 'Bearer tok1' }));
    const out = parseCgiOutput((await c.response(1)).stdout);
    assert.equal(out.status, 200);
    assert.equal(out.header('Variable-REMOTE_USER'), 'alice');
    assert.equal(out.header('Variable-SERVED_BY'), undefined);
    assert.equal(authCalls().length, before, 'pool.php did not run');
  });

  it('on a vhosts listener authorizer_pool takes the authorizer requests of every host, known or not', async () => {
    const c = await connect(vhostsPort);
    const site = { ...phpParams('/elsewhere', 'pool.php'), HTTP_HOST: 'site.test' };
    c.request(1, site);
    assert.equal(parseCgiOutput((await c.response(1)).stdout).body.toString(), 'site');
    // No site is asked: SCRIPT_FILENAME stays as the front end sent it, not under a site's root.
    askAuthorizer(c, 2, { ...site, SCRIPT_FILENAME: join(dir, 'pool.php') });
    askAuthorizer(c, 3, { ...site, HTTP_HOST: 'nowhere.test', SCRIPT_FILENAME: join(dir, 'pool.php') });
    for (const id of [2, 3]) assert.equal(parseCgiOutput((await c.response(id)).stdout).header('Variable-SERVED_BY'), 'authz', `request ${id}`);
  });

  it('authorizer requests go to authorizer_pool, responder requests to pool; a 200 body declared by Content-Length is dropped', async () => {
    const c = await connect();
    const before = authCalls().length;
    askAuthorizer(c, 1, phpParams(dir, 'pool.php'));
    c.request(2, phpParams(dir, 'pool.php'));
    const granted = parseCgiOutput((await c.response(1)).stdout);
    assert.equal(granted.header('Variable-SERVED_BY'), 'authz');
    assert.equal(granted.header('Content-Length'), undefined);
    assert.equal(granted.body.length, 0);
    assert.equal(parseCgiOutput((await c.response(2)).stdout).body.toString(), 'app');
    assert.deepEqual(authCalls().slice(before), ['authz']);
  });

  it('a grant setting a variable that steers the request: 502 ERR_AUTHORIZER_ANSWER, none of its headers passed on', async () => {
    const c = await connect();
    askAuthorizer(c, 1, phpParams(dir, 'steer.php'));
    const r = await c.response(1);
    const out = parseCgiOutput(r.stdout);
    assert.equal(out.status, 502);
    assert.match(out.body.toString(), new RegExp(ErrorCodes.AUTHORIZER_ANSWER));
    assert.doesNotMatch(r.stdout.toString('latin1'), /Variable-|mallory/);
  });

  it('an authorizer request with a body: 400 ERR_AUTHORIZER_BODY, one warning, no worker asked; the connection serves on', async () => {
    const c = await connect();
    const mark = ops.daemon.mark();
    const before = authCalls().length;
    c.sendTogether(requestRecords(1, phpParams(dir, 'pool.php'), Buffer.from('a body'), { role: Role.Authorizer }));
    const r = await c.response(1);
    assert.equal(r.protocolStatus, ProtocolStatus.RequestComplete);
    const out = parseCgiOutput(r.stdout);
    assert.equal(out.status, 400);
    assert.match(out.body.toString(), new RegExp(ErrorCodes.AUTHORIZER_BODY));
    const line = await ops.daemon.waitForLog((l) => l.code === ErrorCodes.AUTHORIZER_BODY, { since: mark, what: 'the ERR_AUTHORIZER_BODY warning' });
    assert.equal(line.bytes, 6);
    // The next authorizer request on the connection is served: and is the only one the worker saw.
    askAuthorizer(c, 2, phpParams(dir, 'pool.php'));
    assert.equal(parseCgiOutput((await c.response(2)).stdout).header('Variable-SERVED_BY'), 'authz');
    assert.deepEqual(authCalls().slice(before), ['authz']);
    // Its access line is written after the answer: by then the refusal's would be too.
    await ops.daemon.waitForLog((l) => l.status === 200 && l.msg !== undefined && JSON.stringify(l).includes('pool.php'), { since: mark, what: 'access line of request 2' });
    assert.equal(ops.daemon.logsSince(mark).filter((l) => l.code === ErrorCodes.AUTHORIZER_BODY).length, 1);
    assert.equal(c.closed, false);
  });

  it('a body after the request reached its worker: 400 all the same, the grant never passed on', async () => {
    const c = await connect();
    askAuthorizer(c, 1, phpParams(dir, 'wait.php'));
    await waitFor(() => authCalls().at(-1) === 'waiting', { timeout: 10_000, what: 'wait.php running' });
    c.send(...stdinRecords(1, Buffer.from('late body')));
    const r = await c.response(1);
    writeFileSync(join(dir, 'go'), '');
    assert.equal(parseCgiOutput(r.stdout).status, 400);
    assert.doesNotMatch(r.stdout.toString('latin1'), /late/);
    c.request(2, phpParams(dir, 'pool.php'));
    assert.equal(parseCgiOutput((await c.response(2)).stdout).body.toString(), 'app');
  });

  it('the filter role is refused with FCGI_UNKNOWN_ROLE and logged; the connection serves on', async () => {
    const c = await connect();
    const mark = ops.daemon.mark();
    c.send(encodeBeginRequest(1, Role.Filter, FCGI_KEEP_CONN), ...paramsRecords(1, phpParams(dir, 'pool.php')), ...stdinRecords(1, Buffer.alloc(0)));
    assert.equal((await c.response(1)).protocolStatus, ProtocolStatus.UnknownRole);
    await ops.daemon.waitForLog((l) => l.code === ErrorCodes.FCGI_UNKNOWN_ROLE && l.role === Role.Filter, { since: mark, what: 'the ERR_FCGI_UNKNOWN_ROLE line' });
    c.request(2, phpParams(dir, 'pool.php'));
    assert.equal(parseCgiOutput((await c.response(2)).stdout).body.toString(), 'app');
  });

  it("status counts the authorizer pool's answers to a front end: allowed, denied, failed", async () => {
    type Answers = { allowed: number; denied: number; failed: number };
    const answers = async (): Promise<Answers> => {
      const r = await ops.ctl(['status', '--json']);
      assert.equal(r.code, 0, r.stderr);
      const pool = (JSON.parse(r.stdout).pools as Array<{ name: string; outcomes?: { authorizerAnswers?: Answers } }>).find((p) => p.name === 'authz');
      return pool?.outcomes?.authorizerAnswers ?? { allowed: 0, denied: 0, failed: 0 };
    };
    const before = await answers();
    const c = await connect(phpPort);
    askAuthorizer(c, 1, phpParams(dir, 'x.php', { HTTP_AUTHORIZATION: 'Bearer tok1' }));
    askAuthorizer(c, 2, phpParams(dir, 'x.php', { HTTP_AUTHORIZATION: 'Bearer wrong' }));
    assert.equal(parseCgiOutput((await c.response(1)).stdout).status, 200);
    assert.equal(parseCgiOutput((await c.response(2)).stdout).status, 401);
    const s = await connect();
    askAuthorizer(s, 1, phpParams(dir, 'steer.php'));
    assert.equal(parseCgiOutput((await s.response(1)).stdout).status, 502);
    // Responder requests are not answers of an authorizer.
    s.request(2, phpParams(dir, 'pool.php'));
    await s.response(2);
    await waitFor(async () => (await answers()).failed > before.failed, { timeout: 5000, what: 'the counts after the access lines' });
    assert.deepEqual(await answers(), { allowed: before.allowed + 1, denied: before.denied + 1, failed: before.failed + 1 });
  });

  it('a reload that points authorizer_pool elsewhere takes effect on the open listener', async () => {
    ops.rewrite(config('other'));
    const r = await ops.ctl(['reload'], 60_000);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const c = await connect();
    askAuthorizer(c, 1, phpParams(dir, 'pool.php'));
    assert.equal(parseCgiOutput((await c.response(1)).stdout).header('Variable-SERVED_BY'), 'other');
    c.request(2, phpParams(dir, 'pool.php'));
    assert.equal(parseCgiOutput((await c.response(2)).stdout).body.toString(), 'app');
    await waitFor(() => authCalls().at(-1) === 'other', { timeout: 5000, what: 'pool other asked' });
  });
});
