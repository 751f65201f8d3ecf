// Target URLs and the CGI variables a bench request carries.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgiParamsFor, parseTarget, TargetError, type RequestShape } from '../../src/bench/target.js';
import { buildWireRequest } from '../../src/bench/wire.js';
import { benchOptionsFrom } from '../../src/cli/bench.js';
import { makeTempDir } from '../helpers/tmp.js';

const shape = (over: Partial<RequestShape> = {}): RequestShape => ({ method: 'GET', body: undefined, headers: [], params: [], keepAlive: false, ...over });

test('TCP targets: scheme, address, path and query', () => {
  const t = parseTarget('fcgi://127.0.0.1:9000/index.php?a=1&b=2');
  assert.equal(t.protocol, 'fastcgi');
  assert.equal(t.address.text, '127.0.0.1:9000');
  assert.equal(t.path, '/index.php');
  assert.equal(t.query, 'a=1&b=2');
  assert.equal(parseTarget('fastcgi://[::1]:9001/').address.text, '[::1]:9001');
  assert.equal(parseTarget('http://localhost/x').address.text, 'localhost:80');
  assert.equal(parseTarget('scgi://127.0.0.1:4000').path, '/');
  assert.equal(parseTarget('http://127.0.0.1:8080?x=1').query, 'x=1');
});

test('Unix targets: the socket path ends at a ".sock" component, else at the first colon', () => {
  const table: Array<[string, string, string, string]> = [
    // url, socket path, request path, query
    ['fcgi://unix:/run/php/php-fpm.sock:/status.php?full', '/run/php/php-fpm.sock', '/status.php', 'full'],
    ['fcgi://unix:/run/php/php-fpm.sock/status.php?full', '/run/php/php-fpm.sock', '/status.php', 'full'],
    ['fcgi://unix:/run/php.sock/index.php', '/run/php.sock', '/index.php', ''],
    ['fcgi://unix:/run/php.sock/a/b.php?x=a:b', '/run/php.sock', '/a/b.php', 'x=a:b'],
    ['fcgi://unix:/run/php.sock?x=1', '/run/php.sock', '/', 'x=1'],
    ['fcgi://unix:/run/php.sock:', '/run/php.sock', '/', ''],
    ['scgi://unix:/tmp/app.sock', '/tmp/app.sock', '/', ''],
    ['http://unix:/run/fcgi-pm.sock:/', '/run/fcgi-pm.sock', '/', ''],
    // No ".sock" and nothing on disk: the colon, or else all of it.
    ['fcgi://unix:/nonexistent/php-socket:/x.php', '/nonexistent/php-socket', '/x.php', ''],
    ['fcgi://unix:/nonexistent/php-socket/x.php', '/nonexistent/php-socket/x.php', '/', ''],
  ];
  for (const [url, sock, path, query] of table) {
    const t = parseTarget(url);
    assert.deepEqual([t.address.kind, t.address.text, t.path, t.query], ['unix', `unix:${sock}`, path, query], url);
  }
});

test('Unix targets: a socket without ".sock" in its name is found on disk', async (t) => {
  const dir = makeTempDir(t, 'fpm-target-');
  mkdirSync(join(dir, 'run'));
  const sock = join(dir, 'run', 'php-fpm');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  const target = parseTarget(`fcgi://unix:${sock}/app/index.php?q=1`);
  assert.deepEqual([target.address.text, target.path, target.query], [`unix:${sock}`, '/app/index.php', 'q=1']);
  // The directory above it is no socket: not taken for one.
  assert.equal(parseTarget(`fcgi://unix:${join(dir, 'run')}:/x`).address.text, `unix:${join(dir, 'run')}`);
});

test('bad targets say what is wrong', () => {
  assert.throws(() => parseTarget('ftp://x:1/'), TargetError);
  assert.throws(() => parseTarget('127.0.0.1:9000/x'), /fcgi:\/\//);
  assert.throws(() => parseTarget('fcgi://unix:relative.sock:/x'), /absolute/);
  assert.throws(() => parseTarget('fcgi://unix:/a.sock:x'), /start with "\/"/);
  assert.throws(() => parseTarget('http://127.0.0.1:99999/'), /port/);
});

test('CGI variables come from the URL; --param overrides; SCRIPT_FILENAME from DOCUMENT_ROOT', () => {
  const t = parseTarget('fcgi://127.0.0.1:9000/app/index.php?q=1');
  const p = cgiParamsFor(t, shape({ method: 'POST', body: Buffer.from('abc'), params: [['DOCUMENT_ROOT', '/var/www/'], ['SERVER_NAME', 'example.org']] })).toObject();
  assert.equal(p.REQUEST_METHOD, 'POST');
  assert.equal(p.SCRIPT_NAME, '/app/index.php');
  assert.equal(p.REQUEST_URI, '/app/index.php?q=1');
  assert.equal(p.QUERY_STRING, 'q=1');
  assert.equal(p.SERVER_PROTOCOL, 'HTTP/1.1');
  assert.equal(p.CONTENT_LENGTH, '3');
  assert.equal(p.SERVER_NAME, 'example.org');
  assert.equal(p.SERVER_PORT, '9000');
  assert.equal(p.SCRIPT_FILENAME, '/var/www/app/index.php');
  const explicit = cgiParamsFor(t, shape({ params: [['SCRIPT_FILENAME', '/x.php'], ['DOCUMENT_ROOT', '/r']] })).toObject();
  assert.equal(explicit.SCRIPT_FILENAME, '/x.php');
  assert.equal(explicit.CONTENT_LENGTH, '');
  const hdr = cgiParamsFor(t, shape({ headers: [['X-Forwarded-For', '10.0.0.1'], ['Content-Type', 'text/plain']] })).toObject();
  assert.equal(hdr.HTTP_X_FORWARDED_FOR, '10.0.0.1');
  assert.equal(hdr.CONTENT_TYPE, 'text/plain');
  assert.equal(cgiParamsFor(t, shape()).get('SCRIPT_FILENAME'), undefined);
});

test('a body is application/octet-stream unless its type is given: PHP must not parse binary bytes as a form', (t) => {
  const target = parseTarget('fcgi://127.0.0.1:9000/upload.php');
  const body = Buffer.from([0, 1, 2, 0x26, 0x3d, 0xff]);
  assert.equal(cgiParamsFor(target, shape({ method: 'POST', body })).get('CONTENT_TYPE'), 'application/octet-stream');
  assert.equal(cgiParamsFor(target, shape({ method: 'POST', body, headers: [['Content-Type', 'application/json']] })).get('CONTENT_TYPE'), 'application/json');
  assert.equal(cgiParamsFor(target, shape()).get('CONTENT_TYPE'), '', 'no body, no type');
  const file = join(makeTempDir(t), 'body.bin');
  writeFileSync(file, body);
  const http = buildWireRequest(parseTarget('http://127.0.0.1:8080/upload'), shape({ method: 'POST', body })).bytes.toString('latin1');
  assert.match(http, /\r\nContent-Type: application\/octet-stream\r\n/);
  const opts = benchOptionsFrom('fcgi://127.0.0.1:9000/upload.php', { param: [], header: [], timeout: '30s', bodyFile: file, contentType: 'image/png' });
  assert.equal(cgiParamsFor(opts.target, opts.request).get('CONTENT_TYPE'), 'image/png');
  assert.throws(() => benchOptionsFrom('fcgi://127.0.0.1:9000/x', { param: [], header: [], timeout: '30s', contentType: 'image/png' }), /--body-file/);
});

test('UTF-8 in params travels as its bytes', () => {
  const t = parseTarget('fcgi://127.0.0.1:9000/x');
  const p = cgiParamsFor(t, shape({ params: [['X', 'é']] }));
  assert.equal(Buffer.from(p.get('X')!, 'latin1').toString('utf8'), 'é');
});
