/** parseAddress: every form operators write, and the mistakes they make. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseAddress, type SocketAddress } from '../../src/protocol/address.js';

const good: Array<[string, SocketAddress]> = [
  ['127.0.0.1:9000', { kind: 'tcp', host: '127.0.0.1', port: 9000, text: '127.0.0.1:9000' }],
  ['localhost:9000', { kind: 'tcp', host: 'localhost', port: 9000, text: 'localhost:9000' }],
  ['php-backend_1.internal:9000', { kind: 'tcp', host: 'php-backend_1.internal', port: 9000, text: 'php-backend_1.internal:9000' }],
  [':9000', { kind: 'tcp', host: '0.0.0.0', port: 9000, text: '0.0.0.0:9000' }],
  ['*:9000', { kind: 'tcp', host: '0.0.0.0', port: 9000, text: '0.0.0.0:9000' }],
  ['[::1]:9000', { kind: 'tcp', host: '::1', port: 9000, text: '[::1]:9000' }],
  ['[::]:80', { kind: 'tcp', host: '::', port: 80, text: '[::]:80' }],
  ['[::ffff:127.0.0.1]:8080', { kind: 'tcp', host: '::ffff:127.0.0.1', port: 8080, text: '[::ffff:127.0.0.1]:8080' }],
  ['127.0.0.1:0', { kind: 'tcp', host: '127.0.0.1', port: 0, text: '127.0.0.1:0' }],
  ['127.0.0.1:65535', { kind: 'tcp', host: '127.0.0.1', port: 65535, text: '127.0.0.1:65535' }],
  ['  127.0.0.1:9000\n', { kind: 'tcp', host: '127.0.0.1', port: 9000, text: '127.0.0.1:9000' }],
  ['unix:/run/php/app.sock', { kind: 'unix', path: '/run/php/app.sock', text: 'unix:/run/php/app.sock' }],
  ['/run/php/app.sock', { kind: 'unix', path: '/run/php/app.sock', text: 'unix:/run/php/app.sock' }],
  ['unix:/tmp/with:colon.sock', { kind: 'unix', path: '/tmp/with:colon.sock', text: 'unix:/tmp/with:colon.sock' }],
];
for (const [input, want] of good) {
  test(`parses ${JSON.stringify(input)}`, () => {
    assert.deepEqual(parseAddress(input), want);
  });
}

const bad: Array<[string, RegExp]> = [
  ['', /needs a port/],
  ['9000', /needs a port/],
  ['localhost', /needs a port/],
  ['./app.sock', /needs a port/],
  ['unix:', /must be absolute/],
  ['unix:run/app.sock', /must be absolute/],
  ['127.0.0.1:', /bad port/],
  ['127.0.0.1:http', /bad port/],
  ['127.0.0.1:-1', /bad port/],
  ['127.0.0.1:65536', /out of range/],
  ['127.0.0.1:99999999999999999999', /out of range/],
  ['::1:9000', /IPv6 addresses need brackets/],
  ['[::1]', /IPv6 addresses need brackets/],
  ['[]:80', /bad host name/],
  ['a b:80', /bad host name/],
  ['x/y:80', /bad host name/],
  ['tcp://host:80', /IPv6 addresses need brackets|bad host name/],
];
for (const [input, why] of bad) {
  test(`refuses ${JSON.stringify(input)}`, () => {
    const r = parseAddress(input);
    assert.equal(typeof r, 'string', `got ${JSON.stringify(r)}`);
    assert.match(r as string, why);
    if (input.trim() !== '') assert.ok((r as string).includes(input), 'the message quotes the input');
  });
}
