/**
 * accept: direct where the native addon is missing (an install without a compiler): the
 * daemon listens on the pool's direct_listen itself, so docs/direct.md's nginx block
 * (the direct socket first, the overflow listener as backup) serves every request with
 * no error line in nginx's log; status says the pool is in fallback. Real nginx and
 * php-cgi; the daemon runs from a copy of the built files without native/build.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { httpRequest } from '../helpers/http-client.js';
import { startNginxDirect } from '../helpers/nginx.js';
import { PHP_FIXTURES } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { orphanPids, phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { installWithoutAddon, runBin } from '../cli/helpers.js';
import { opsDaemon } from '../ops/helpers.js';

test('without the native addon, a direct pool falls back: fcgi-pm answers on direct_listen, nginx logs no error, status says fallback', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-direct-fb-');
  const bin = installWithoutAddon(dir);

  const port = await freePort();
  const ops = await opsDaemon(t, {
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, pool: 'app' }],
    pools: {
      app: { command: phpCommand(dir, 'direct-fallback'), accept: 'direct', direct_listen: `unix:${dir}/direct.sock`, direct_socket_mode: '0666', pm: 'ondemand', max_children: 2 },
    },
    log: { level: 'info' },
  }, { bin });
  t.after(() => {
    for (const pid of orphanPids(dir)) process.kill(pid, 'SIGKILL');
  });
  const ngx = await startNginxDirect(t, PHP_FIXTURES, `${dir}/direct.sock`, port, '60s');
  for (let i = 0; i < 20; i++) {
    const r = await httpRequest(`${ngx.url}/hello.php`, { timeout: 20_000 });
    assert.equal(r.status, 200, r.text);
  }
  const errors = ngx.errorLog().split('\n').filter((l) => /\[(crit|error|alert|emerg)\]/.test(l));
  assert.deepEqual(errors, [], 'nginx logged no error for the direct socket');

  const st = await runBin(['status', '--json', '--control', ops.control], { bin });
  const pool = JSON.parse(st.stdout).pools.find((p: { name: string }) => p.name === 'app');
  assert.equal(pool.kind, 'spawned');
  assert.equal(pool.directFallback.address, `unix:${dir}/direct.sock`);
  assert.match(pool.directFallback.reason, /native addon .* is not built/);
  assert.ok(pool.completed >= 20, 'the requests went through fcgi-pm');
  for (const args of [['status'], ['status', '--full']]) {
    const text = await runBin([...args, '--control', ops.control], { bin });
    assert.match(text.stdout, /accept: direct in fallback \(.*\): fcgi-pm listens on unix:.*direct\.sock itself/, args.join(' '));
  }
  assert.ok(ops.daemon.logsSince().some((l) => l['code'] === 'ERR_DIRECT_SOCKET' && l['kind'] === 'direct-fallback'));
});
