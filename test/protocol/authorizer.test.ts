import assert from 'node:assert/strict';
import { test } from 'node:test';
import { grantedHead, judgeAuthorizerAnswer, MAX_AUTHORIZER_VARIABLES, variableNameProblem } from '../../src/protocol/authorizer.js';
import { parseCgiHead } from '../../src/protocol/cgi-response.js';

const head = (text: string) => parseCgiHead(Buffer.from(`${text}\r\n\r\n`, 'latin1'));

test('200 grants; Variable- headers (any case of the prefix) are the variables, in order, prefix removed', () => {
  const a = judgeAuthorizerAnswer(head('Status: 200 OK\r\nVariable-REMOTE_USER: alice\r\nX-Other: 1\r\nvariable-Auth_Group: staff'));
  assert.deepEqual(a, { kind: 'allow', variables: [['REMOTE_USER', 'alice'], ['Auth_Group', 'staff']] });
  assert.deepEqual(judgeAuthorizerAnswer(head('Content-Type: text/plain')), { kind: 'allow', variables: [] });
});

test('any other status denies, whatever its headers', () => {
  for (const s of [401, 403, 302, 500, 201]) {
    assert.deepEqual(judgeAuthorizerAnswer(head(`Status: ${s}\r\nVariable-REMOTE_USER: alice`)), { kind: 'deny' });
  }
  // A Location without Status is a 302 in CGI: a deny (the redirect goes to the client).
  assert.deepEqual(judgeAuthorizerAnswer(head('Location: /login')), { kind: 'deny' });
});

test('names an authorizer may not set, or that are not names, make the grant bad', () => {
  for (const name of ['SCRIPT_FILENAME', 'script_filename', 'HTTP_HOST', 'Http_Cookie', 'PHP_VALUE', 'DOCUMENT_ROOT', 'FCGI_ROLE', '9LIVES', 'A-B', 'A.B', 'x'.repeat(129)]) {
    const a = judgeAuthorizerAnswer(head(`Variable-${name}: v`));
    assert.equal(a.kind, 'bad', name);
    assert.ok(variableNameProblem(name) !== undefined, name);
  }
  for (const name of ['REMOTE_USER', 'AUTH_TYPE', '_x', 'A1', 'x'.repeat(128)]) assert.equal(variableNameProblem(name), undefined, name);
  // "Variable-" alone names nothing: not a variable header.
  assert.deepEqual(judgeAuthorizerAnswer(head('Variable-: v')), { kind: 'allow', variables: [] });
});

test('more than the cap of variables is a bad grant', () => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `Variable-V${i}: ${i}`).join('\r\n');
  assert.equal(judgeAuthorizerAnswer(head(lines(MAX_AUTHORIZER_VARIABLES))).kind, 'allow');
  assert.equal(judgeAuthorizerAnswer(head(lines(MAX_AUTHORIZER_VARIABLES + 1))).kind, 'bad');
});

test('grantedHead drops the headers that describe a body, keeps the rest and the reason', () => {
  const g = grantedHead(head('Status: 200 Fine\r\nContent-Length: 12\r\nTransfer-Encoding: chunked\r\nVariable-REMOTE_USER: alice\r\nContent-Type: text/plain'));
  assert.equal(g.status, 200);
  assert.equal(g.reason, 'Fine');
  assert.deepEqual(g.headers, [['Variable-REMOTE_USER', 'alice'], ['Content-Type', 'text/plain']]);
  assert.equal(g.raw.toString('latin1'), 'Status: 200 Fine\r\nVariable-REMOTE_USER: alice\r\nContent-Type: text/plain\r\n\r\n');
  assert.deepEqual(judgeAuthorizerAnswer(g), { kind: 'allow', variables: [['REMOTE_USER', 'alice']] });
});
