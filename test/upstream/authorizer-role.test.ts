/**
 * Authorizer exchanges on the upstream side: the role a backend is asked to play
 * (native FCGI_AUTHORIZER to a real php-cgi, FCGI_ROLE=AUTHORIZER for responder-only
 * applications and SCGI) and how its answer is passed on (a granting answer without its
 * body, a deny as it is, a Variable- header we will not set fails the request).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ErrorCodes } from '../../src/errors.js';
import { silentLogger } from '../../src/log/log.js';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';
import { Role } from '../../src/protocol/fastcgi.js';
import { UpstreamEndpoint } from '../../src/upstream/endpoint.js';
import type { UpstreamOptions } from '../../src/upstream/types.js';
import { makeTempDir } from '../helpers/tmp.js';
import { withTimeout } from '../helpers/wait.js';
import { FastcgiFixture } from '../fixtures/upstream/fastcgi-server.js';
import { startPhpCgi, writeScripts } from '../fixtures/upstream/php.js';
import { ScgiFixture } from '../fixtures/upstream/scgi-server.js';
import { phpParams, runExchange, type RunOptions, type RunResult } from '../fixtures/upstream/sink.js';

const SCRIPTS: Record<string, string> = {
  // Grants with the role php-cgi saw, and writes a body the granting answer must not carry.
  'grant.php': `<?php
    header('Variable-SEEN_ROLE: ' . ($_SERVER['FCGI_ROLE'] ?? 'none'));
    header('Variable-REMOTE_USER: alice');
    header('Content-Type: text/plain');
    echo 'this body is not for anyone';`,
  'deny.php': `<?php
    http_response_code(401);
    header('WWW-Authenticate: Bearer');
    header('Content-Type: text/plain');
    echo 'no token';`,
  'steer.php': `<?php header('Variable-SCRIPT_FILENAME: /etc/passwd'); echo 'x';`,
  'badname.php': `<?php header('Variable-9LIVES: x'); echo 'x';`,
};

function options(over: Partial<UpstreamOptions> = {}): UpstreamOptions {
  return { protocol: 'fastcgi', connectTimeout: 2000, readTimeout: 10_000, keepAlive: true, maxIdle: 4, ...over };
}

async function phpEndpoint(t: TestContext): Promise<{ run(script: string, o?: RunOptions): Promise<RunResult> }> {
  const dir = makeTempDir(t, 'fpm-authz-');
  writeScripts(dir, SCRIPTS);
  let endpoint: UpstreamEndpoint | undefined;
  t.after(() => endpoint?.destroy());
  const php = await startPhpCgi(t, dir);
  const ep = new UpstreamEndpoint(parseAddress(`unix:${php.socketPath}`) as SocketAddress, options(), silentLogger());
  endpoint = ep;
  return { run: (script, o = {}) => withTimeout(runExchange(ep, phpParams(dir, script), o), 20_000, script) };
}

function header(r: RunResult, name: string): string | undefined {
  return r.sink.gotHead?.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
}

test('php-cgi as a native authorizer: role FCGI_AUTHORIZER, a grant passes its head without the body', async (t) => {
  const s = await phpEndpoint(t);
  const asResponder = await s.run('grant.php');
  assert.equal(asResponder.sink.bodyBuffer.toString(), 'this body is not for anyone');
  assert.equal(header(asResponder, 'Variable-SEEN_ROLE'), 'RESPONDER');

  const r = await s.run('grant.php', { role: Role.Authorizer });
  assert.deepEqual(r.outcome, { kind: 'done' }, r.outcome.kind === 'failed' ? r.outcome.error.message : '');
  assert.equal(r.sink.gotHead?.status, 200);
  assert.equal(header(r, 'Variable-SEEN_ROLE'), 'AUTHORIZER');
  assert.equal(header(r, 'Variable-REMOTE_USER'), 'alice');
  // The judged grant, for whoever acts on it (a pool's authorizer step).
  assert.deepEqual(r.ex.granted, ['SEEN_ROLE', 'AUTHORIZER', 'REMOTE_USER', 'alice']);
  assert.equal(asResponder.ex.granted, undefined);
  assert.equal(r.sink.bodyBytes, 0);
  assert.equal(r.ex.bytesOut, 0);
  // The head passed on describes no body.
  assert.equal(header(r, 'Content-Length'), undefined);
  assert.doesNotMatch(r.sink.gotHead!.raw.toString('latin1'), /content-length/i);
});

test('a deny goes on as the authorizer wrote it: status, headers and body', async (t) => {
  const s = await phpEndpoint(t);
  const r = await s.run('deny.php', { role: Role.Authorizer });
  assert.deepEqual(r.outcome, { kind: 'done' });
  assert.equal(r.sink.gotHead?.status, 401);
  assert.equal(header(r, 'WWW-Authenticate'), 'Bearer');
  assert.equal(r.sink.bodyBuffer.toString(), 'no token');
  assert.equal(r.ex.granted, undefined);
});

for (const [script, what] of [['steer.php', 'SCRIPT_FILENAME'], ['badname.php', '9LIVES']] as const) {
  test(`a grant with Variable-${what} fails the request with ERR_AUTHORIZER_ANSWER, nothing passed on`, async (t) => {
    const s = await phpEndpoint(t);
    const r = await s.run(script, { role: Role.Authorizer });
    assert.equal(r.outcome.kind, 'failed');
    if (r.outcome.kind !== 'failed') return;
    assert.equal(r.outcome.error.code, ErrorCodes.AUTHORIZER_ANSWER);
    assert.equal(r.outcome.error.status, 502);
    assert.equal(r.outcome.retryable, false);
    assert.match(r.outcome.error.message, new RegExp(what));
    assert.equal(r.sink.gotHead, undefined);
    // As a responder the same script is an ordinary page.
    const plain = await s.run(script);
    assert.deepEqual(plain.outcome, { kind: 'done' });
  });
}

async function fixtureEndpoint(t: TestContext, over: Partial<UpstreamOptions>): Promise<{ fixture: FastcgiFixture; endpoint: UpstreamEndpoint }> {
  const dir = makeTempDir(t, 'fpm-authz-fx-');
  const path = join(dir, 'fcgi.sock');
  const fixture = await FastcgiFixture.start(path);
  const endpoint = new UpstreamEndpoint({ kind: 'unix', path, text: `unix:${path}` }, options(over), silentLogger());
  t.after(async () => {
    endpoint.destroy();
    await fixture.close();
  });
  return { fixture, endpoint };
}

test('an application that refuses the role: ERR_AUTHORIZER_ROLE naming authorizer_role', async (t) => {
  const { fixture, endpoint } = await fixtureEndpoint(t, {});
  const r = await withTimeout(runExchange(endpoint, { MODE: 'responder-only' }, { role: Role.Authorizer }), 20_000, 'authorizer');
  assert.equal(r.outcome.kind, 'failed');
  if (r.outcome.kind !== 'failed') return;
  assert.equal(r.outcome.error.code, ErrorCodes.AUTHORIZER_ROLE);
  assert.match(r.outcome.error.message, /authorizer_role: responder/);
  assert.deepEqual(fixture.events.roles, [Role.Authorizer]);
});

test('authorizer_role responder: a responder request with FCGI_ROLE=AUTHORIZER', async (t) => {
  const { fixture, endpoint } = await fixtureEndpoint(t, { authorizerRole: 'responder' });
  const r = await withTimeout(runExchange(endpoint, { MODE: 'responder-only', FCGI_ROLE: 'SPOOFED' }, { role: Role.Authorizer }), 20_000, 'authorizer');
  assert.deepEqual(r.outcome, { kind: 'done' }, r.outcome.kind === 'failed' ? r.outcome.error.message : '');
  assert.equal(r.sink.gotHead?.status, 200);
  assert.equal(r.sink.bodyBytes, 0, 'a grant carries no body');
  assert.deepEqual(fixture.events.roles, [Role.Responder]);
  // The client's own FCGI_ROLE is replaced, not sent beside ours.
  assert.deepEqual(fixture.events.params[0]!.pairs.filter((_, i, a) => i % 2 === 0 && a[i] === 'FCGI_ROLE'), ['FCGI_ROLE']);
  assert.equal(fixture.events.params[0]!.get('FCGI_ROLE'), 'AUTHORIZER');
});

test('SCGI: an authorizer request carries FCGI_ROLE=AUTHORIZER', async (t) => {
  const dir = makeTempDir(t, 'fpm-authz-scgi-');
  const path = join(dir, 'scgi.sock');
  const fixture = await ScgiFixture.start(path);
  const endpoint = new UpstreamEndpoint({ kind: 'unix', path, text: `unix:${path}` }, options({ protocol: 'scgi', keepAlive: false }), silentLogger());
  t.after(async () => {
    endpoint.destroy();
    await fixture.close();
  });
  const r = await withTimeout(runExchange(endpoint, { REQUEST_METHOD: 'GET', SCRIPT_NAME: '/x' }, { role: Role.Authorizer }), 20_000, 'scgi');
  assert.deepEqual(r.outcome, { kind: 'done' });
  // The fixture answers 201 (a deny, passed on as it is) with the params it got.
  assert.equal(r.sink.gotHead?.status, 201);
  const seen = JSON.parse(Buffer.from(header(r, 'X-Params')!, 'base64').toString()) as Record<string, string>;
  assert.equal(seen.FCGI_ROLE, 'AUTHORIZER');
});
