// What an authorizer is asked with: the request's variables but the spec's four and the
// script, and a grant's variables set on the request without decoding FastCGI PARAMS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ErrorCodes, ProxyError } from '../../src/errors.js';
import { AUTHORIZER_DROPS, MAX_DENY_BODY, authorize, authorizerParams } from '../../src/frontend/authorize.js';
import type { FrontendContext } from '../../src/frontend/index.js';
import type { AuthorizerRules } from '../../src/pool/types.js';
import { Exchange, type CgiResponseHead, type ResponseSink } from '../../src/protocol/exchange.js';
import { Role } from '../../src/protocol/fastcgi.js';
import { CgiParams, DEFAULT_PARAMS_LIMITS } from '../../src/protocol/params.js';
import { FcgiParams, encodeNameValues, decodeNameValues } from '../../src/protocol/fastcgi-params.js';
import { FakePool, echoParams, makeHead } from '../helpers/fake-pool.js';
import { lineLogger } from '../helpers/log.js';

const request = {
  REQUEST_METHOD: 'POST',
  REQUEST_URI: '/admin/orders?page=2',
  QUERY_STRING: 'page=2',
  HTTP_AUTHORIZATION: 'Bearer t',
  HTTP_COOKIE: 'sid=1',
  REMOTE_ADDR: '10.0.0.7',
  CONTENT_TYPE: 'application/json',
  CONTENT_LENGTH: '12',
  SCRIPT_NAME: '/admin/index.php',
  SCRIPT_FILENAME: '/srv/www/admin/index.php',
  PATH_INFO: '/orders',
  PATH_TRANSLATED: '/srv/www/orders',
  DOCUMENT_ROOT: '/srv/www',
};

test('an authorizer gets every variable but CONTENT_LENGTH, PATH_INFO, PATH_TRANSLATED, SCRIPT_NAME and SCRIPT_FILENAME', () => {
  for (const params of [CgiParams.fromObject(request), new FcgiParams(encodeNameValues(CgiParams.fromObject(request)), 13)]) {
    const got = authorizerParams(params).toObject();
    const want = Object.fromEntries(Object.entries(request).filter(([k]) => !AUTHORIZER_DROPS.has(k)));
    assert.deepEqual(got, want);
    for (const k of ['CONTENT_LENGTH', 'PATH_INFO', 'PATH_TRANSLATED', 'SCRIPT_NAME', 'SCRIPT_FILENAME']) assert.equal(got[k], undefined, k);
    // The request keeps its own.
    assert.equal(params.get('SCRIPT_FILENAME'), '/srv/www/admin/index.php');
  }
});

test('FastCGI PARAMS stay undecoded: the request keeps its bytes, the authorizer gets a copy of those it may see', () => {
  const wire = encodeNameValues(CgiParams.fromObject(request));
  const params = new FcgiParams(wire, 13);
  params.override(['HTTPS', 'on', 'SCRIPT_FILENAME', '/srv/www/admin/index.php']); // a listener's params
  const asked = authorizerParams(params);
  assert.ok(asked instanceof FcgiParams);
  assert.equal(asked.size, 8 + 1, "13 less the 5 left out, and the listener's HTTPS");
  assert.equal(asked.get('HTTPS'), 'on', "the listener's params reach the authorizer too");
  assert.equal(asked.get('SCRIPT_FILENAME'), undefined);
  assert.equal(asked.get('HTTP_AUTHORIZATION'), 'Bearer t');
  const out = Buffer.alloc(asked.wireLength());
  asked.writeWire(out, 0);
  assert.deepEqual(decodeNameValues(out, DEFAULT_PARAMS_LIMITS).toObject(), { ...Object.fromEntries(Object.entries(request).filter(([k]) => !AUTHORIZER_DROPS.has(k))), HTTPS: 'on' });
  // The request itself is still its bytes: the grant's variables join the listener's.
  params.override(['REMOTE_USER', 'ann', 'HTTPS', 'off']);
  const sent = Buffer.alloc(params.wireLength());
  params.writeWire(sent, 0);
  const got = decodeNameValues(sent, DEFAULT_PARAMS_LIMITS);
  assert.deepEqual(got.toObject(), { ...request, HTTPS: 'off', REMOTE_USER: 'ann' });
  assert.equal(got.size, 15, 'one pair per name');
  assert.equal(params.get('HTTPS'), 'off');
});

test('authorizerParams reads FastCGI PARAMS without decoding them', () => {
  const wire = encodeNameValues(CgiParams.fromObject(request));
  const params = new FcgiParams(wire, 13);
  authorizerParams(params);
  assert.equal(params.wire, wire, 'the request goes on with the bytes it came with');
});

test("a grant's variables replace every copy the client sent; FastCGI bytes are copied, not re-encoded", () => {
  const flat = ['REMOTE_USER', 'mallory', ...Object.entries(request).flat(), 'REMOTE_USER', 'eve'];
  const wire = encodeNameValues(new CgiParams(flat));
  const params = new FcgiParams(wire, flat.length / 2);
  params.override(['REMOTE_USER', 'ann', 'AUTH_TYPE', 'Bearer']);
  assert.equal(params.get('REMOTE_USER'), 'ann');
  const out = Buffer.alloc(params.wireLength());
  params.writeWire(out, 0);
  const sent = decodeNameValues(out, DEFAULT_PARAMS_LIMITS).pairs;
  assert.deepEqual(sent.filter((_, i) => i % 2 === 0 && sent[i] === 'REMOTE_USER').length, 1);
  assert.equal(decodeNameValues(out, DEFAULT_PARAMS_LIMITS).get('AUTH_TYPE'), 'Bearer');
  assert.equal(decodeNameValues(out, DEFAULT_PARAMS_LIMITS).get('REQUEST_URI'), '/admin/orders?page=2');
});

// ---- authorize() with fake pools: what happens to the request for each kind of answer ----

interface Client {
  ex: Exchange;
  head?: CgiResponseHead;
  body: Buffer[];
  ended: boolean;
  error?: ProxyError;
}

function client(params: Record<string, string> = request): Client {
  const c: Client = { body: [], ended: false } as unknown as Client;
  const sink: ResponseSink = {
    head: (h) => void (c.head = h),
    body: (b) => (c.body.push(b), true),
    stderr: () => {},
    end: () => void (c.ended = true),
    fail: (e) => ((c.error = e), 0),
  };
  c.ex = new Exchange(CgiParams.fromObject(params), sink, 'http', performance.now());
  return c;
}

function rig(behaviour: (ex: Exchange) => void): { auth: FakePool; app: FakePool; ctx: FrontendContext; warnings: string[]; rules: AuthorizerRules } {
  const auth = new FakePool((ex) => behaviour(ex), 'auth');
  const app = new FakePool(echoParams, 'app');
  const warnings: string[] = [];
  const ctx: FrontendContext = {
    getPool: (n) => (n === 'auth' ? auth : undefined),
    limits: DEFAULT_PARAMS_LIMITS,
    logger: lineLogger('warn', (l) => warnings.push(l)),
    onExchange: () => {},
  };
  return { auth, app, ctx, warnings, rules: { pool: 'auth', cacheMs: 0, cacheKey: [] } };
}

test('a grant: the authorizer request has role AUTHORIZER and no body; the request goes on with the variables', () => {
  const r = rig((aex) => {
    // As the upstream passes a grant on (src/upstream/connection-base.ts passHead): judged, then the head.
    aex.granted = ['REMOTE_USER', 'ann'];
    aex.respondHead(makeHead(200, [['Variable-REMOTE_USER', 'ann']]));
    aex.respondEnd();
  });
  const c = client();
  let went = 0;
  authorize(r.ctx, r.app, r.rules, c.ex, () => went++);
  const aex = r.auth.dispatched[0]!;
  assert.equal(aex.role, Role.Authorizer);
  assert.ok(aex.noBody);
  assert.equal(aex.params.get('SCRIPT_FILENAME'), undefined);
  assert.equal(went, 1);
  assert.equal(c.ex.params.get('REMOTE_USER'), 'ann');
  assert.equal(c.ex.authorization, 'allowed');
  assert.equal(c.ex.onAbort, undefined, 'the step no longer holds the request');
});

test("a deny: the authorizer's head and body are the client's answer; the request goes nowhere", () => {
  const r = rig((aex) => {
    aex.respondHead(makeHead(401, [['WWW-Authenticate', 'Basic realm="x"']]));
    aex.respondBody(Buffer.from('no\n'));
    aex.respondEnd();
  });
  const c = client();
  authorize(r.ctx, r.app, r.rules, c.ex, () => assert.fail('not granted'));
  assert.equal(c.head?.status, 401);
  assert.deepEqual(c.head?.headers, [['WWW-Authenticate', 'Basic realm="x"']]);
  assert.equal(Buffer.concat(c.body).toString(), 'no\n');
  assert.ok(c.ended);
  assert.equal(c.ex.authorization, 'denied');
  assert.equal(c.ex.pool, 'app');
});

test(`a deny with a body over ${MAX_DENY_BODY} bytes is a failure: 503, and the authorizer request is stopped`, async () => {
  const r = rig((aex) => {
    aex.respondHead(makeHead(403));
    aex.respondBody(Buffer.alloc(MAX_DENY_BODY));
    aex.respondBody(Buffer.alloc(1));
  });
  const c = client();
  authorize(r.ctx, r.app, r.rules, c.ex, () => assert.fail('not granted'));
  assert.equal(c.error?.code, ErrorCodes.AUTHORIZER_FAILED);
  assert.equal(c.error?.status, 503);
  assert.equal(c.head, undefined, 'nothing of the deny was sent');
  await r.auth.abortedP(r.auth.dispatched[0]!);
});

test('a client that leaves while its request is authorized aborts the authorizer request; a late answer is dropped', async () => {
  const r = rig(() => {});
  const c = client();
  authorize(r.ctx, r.app, r.rules, c.ex, () => assert.fail('a request whose client left goes nowhere'));
  const aex = r.auth.dispatched[0]!;
  c.ex.abort();
  await r.auth.abortedP(aex);
  aex.respondHead(makeHead(200));
  aex.respondEnd();
  assert.equal(c.ex.authorization, undefined);
});

test('failures deny with 503 ERR_AUTHORIZER_FAILED: one warning line naming both pools and the cause, not one per request', () => {
  const r = rig((aex) => aex.respondError(new ProxyError(ErrorCodes.WORKER_CRASHED, 502, 'worker 7 crashed')));
  for (let i = 0; i < 3; i++) {
    const c = client();
    authorize(r.ctx, r.app, r.rules, c.ex, () => assert.fail('not granted'));
    assert.equal(c.error?.code, ErrorCodes.AUTHORIZER_FAILED);
    assert.equal(c.ex.authorization, 'failed');
  }
  assert.equal(r.warnings.length, 1);
  const line = JSON.parse(r.warnings[0]!);
  assert.equal(line.code, ErrorCodes.AUTHORIZER_FAILED);
  assert.equal(line.pool, 'app');
  assert.equal(line.authorizer, 'auth');
  assert.equal(line.cause, ErrorCodes.WORKER_CRASHED);
  // No authorizer pool at all (a vhosts site naming one the config lacks) fails the same way.
  const c = client();
  authorize(r.ctx, r.app, { ...r.rules, pool: 'missing' }, c.ex, () => assert.fail('not granted'));
  assert.equal(c.error?.code, ErrorCodes.AUTHORIZER_FAILED);
});
