// accept: direct: what a pool may set when its workers accept on a shared socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { poolConfigFromObject } from '../../src/config/schema.js';
import { problemsOf } from './helpers.js';

const base = { command: ['/usr/bin/php-cgi'], accept: 'direct', direct_listen: 'unix:/run/x/direct.sock' };

test('a php-cgi direct pool: backlog 511 as PHP-FPM\'s listen.backlog, PHP_FCGI_MAX_REQUESTS left to the pool, the guard kept', () => {
  const p = poolConfigFromObject('app', { ...base, max_children: 7 });
  assert.equal(p.accept, 'direct');
  assert.deepEqual(p.directListen, { kind: 'unix', path: '/run/x/direct.sock', text: 'unix:/run/x/direct.sock' });
  assert.equal(p.directBacklog, 511);
  assert.equal(p.directSocketMode, 0o660);
  assert.equal(p.env['PHP_FCGI_CHILDREN'], '0');
  assert.equal('PHP_FCGI_MAX_REQUESTS' in p.env, false);
  assert.deepEqual(p.limitExtensions, ['.php', '.phar']);
  // A proxied php-cgi pool still gets 0 (fcgi-pm counts).
  assert.equal(poolConfigFromObject('p', { command: ['/usr/bin/php-cgi'] }).env['PHP_FCGI_MAX_REQUESTS'], '0');
});

test('direct needs direct_listen with a numeric address', () => {
  assert.match(problemsOf(() => poolConfigFromObject('app', { command: ['php-cgi'], accept: 'direct' })).join('\n'), /needs "direct_listen"/);
  assert.match(problemsOf(() => poolConfigFromObject('app', { ...base, direct_listen: 'localhost:9001' })).join('\n'), /direct_listen: give a numeric address, e.g. "127.0.0.1:9001"/);
  assert.equal(poolConfigFromObject('app', { ...base, direct_listen: '127.0.0.1:9001' }).directListen?.kind, 'tcp');
});

test('what cannot work without a proxy in between is refused, with the reason', () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ group_size: 2, max_children: 4 }, /group_size: accept: direct: every php-cgi accepts on the shared socket already/],
    [{ socket: 'argv', command: ['php-cgi', '-b', '{socket}'] }, /socket: accept: direct: the workers get the shared socket as fd 0/],
    [{ authorizer: 'auth' }, /authorizer: accept: direct: requests reach the workers without fcgi-pm, so no authorizer can be asked first/],
    [{ script: '/srv/a.php' }, /script: accept: direct: the front end sets SCRIPT_FILENAME/],
  ];
  for (const [extra, re] of cases) assert.match(problemsOf(() => poolConfigFromObject('app', { ...base, ...extra })).join('\n'), re);
});

test('a direct pool of another program that needs the script guard is refused; without rules it is fine', () => {
  const other = { ...base, command: ['/usr/bin/my-fcgi-app'] };
  const msg = problemsOf(() => poolConfigFromObject('app', { ...other, limit_extensions: ['.php'] })).join('\n');
  assert.match(msg, /limit_extensions: accept: direct: requests reach the workers without fcgi-pm, and only php-cgi can run the guard itself/);
  assert.match(problemsOf(() => poolConfigFromObject('app', { ...other, script_roots: ['/srv'] })).join('\n'), /script_roots: accept: direct/);
  assert.equal(poolConfigFromObject('app', other).accept, 'direct');
});

test('a Django direct pool: preload forks and exec\'d workers, over FastCGI and over SCGI, are accepted', () => {
  const adapter = ['/usr/bin/python3', '/usr/bin/fcgi-pm-wsgi'];
  for (const backend of ['fastcgi', 'scgi'] as const) {
    for (const preload of [true, false]) {
      const p = poolConfigFromObject('dj', { ...base, backend, preload, command: [...adapter, `--${backend}`, 'mysite.wsgi:application'] });
      assert.deepEqual({ accept: p.accept, backend: p.backend, preload: p.preload === true }, { accept: 'direct', backend, preload });
    }
  }
  // Still refused for them, with the reason: what needs fcgi-pm in the path.
  const py = { ...base, command: [...adapter, 'mysite.wsgi:application'], preload: true };
  assert.match(problemsOf(() => poolConfigFromObject('dj', { ...py, socket: 'argv', command: [...adapter, '--socket', '{socket}', 'm:a'] })).join('\n'), /socket: accept: direct: the workers get the shared socket/);
  assert.match(problemsOf(() => poolConfigFromObject('dj', { ...py, script: '/srv/app.py' })).join('\n'), /script: accept: direct/);
});
