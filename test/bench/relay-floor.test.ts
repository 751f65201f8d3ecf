// The yardstick works: nginx → bench/relay-floor → real php-cgi serves real pages,
// kept-alive and not, with more requests at once than workers (they queue).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManagedChild } from '../helpers/child.js';
import { httpRequest } from '../helpers/http-client.js';
import { fastcgiParams, startNginx } from '../helpers/nginx.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { makeTempDir } from '../helpers/tmp.js';
import { WaitAborted, canConnect, waitFor } from '../helpers/wait.js';

test('relay floor: nginx → relay → php-cgi, kept-alive and per-request connections, queueing', { timeout: 60_000 }, async (t) => {
  const dir = makeTempDir(t, 'fpm-floor-');
  const doc = join(dir, 'www');
  const sock = join(dir, 'floor.sock');
  mkdirSync(doc);
  writeFileSync(join(doc, 'big.php'), "<?php usleep(20000); echo getmypid(), ' ', $_GET['n'] ?? '', ' ', str_repeat('y', 70000);\n");
  const relay = new ManagedChild('relay-floor', process.execPath, [join(REPO_ROOT, 'dist', 'bench', 'relay-floor.js'), '--listen', `unix:${sock}`, '--workers', '2'], {}, 'SIGTERM');
  t.after(() => relay.stop());
  await waitFor(async () => {
    if (!relay.running) throw new WaitAborted(`relay-floor exited: ${relay.stderr}`);
    return canConnect({ path: sock });
  }, { timeout: 15_000, what: 'relay-floor socket' });
  const ngx = await startNginx(
    t,
    `root ${doc};
    location /keep/ { ${fastcgiParams()} fastcgi_param SCRIPT_FILENAME ${doc}/big.php; fastcgi_pass floor; fastcgi_keep_conn on; }
    location /close/ { ${fastcgiParams()} fastcgi_param SCRIPT_FILENAME ${doc}/big.php; fastcgi_pass unix:${sock}; }`,
    { httpExtra: `upstream floor { server unix:${sock}; keepalive 4; }` },
  );
  // 8 requests at once on 2 workers, half through each location: all answered in full.
  const replies = await Promise.all(
    Array.from({ length: 8 }, (_, i) => httpRequest(`${ngx.url}/${i % 2 === 0 ? 'keep' : 'close'}/x?n=${i}`)),
  );
  const pids = new Set<string>();
  for (const [i, r] of replies.entries()) {
    assert.equal(r.status, 200, `${i}: ${r.text.slice(0, 200)}\n${ngx.errorLog()}`);
    const [pid, n, body] = r.text.split(' ');
    assert.equal(n, String(i));
    assert.equal(body, 'y'.repeat(70000));
    pids.add(pid!);
  }
  assert.ok(pids.size >= 1 && pids.size <= 2, `php-cgi processes: ${[...pids].join(', ')}`);
  assert.ok(relay.running, relay.stderr);
});
