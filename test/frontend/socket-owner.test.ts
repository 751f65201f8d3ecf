/**
 * Unix socket owner/group: fcgi-pm runs as root and nginx's workers as www-data (as
 * Debian's nginx does). A socket given to www-data (owner and group with mode 0660, or
 * owner alone, which keeps 0600) serves nginx; the same
 * socket left root:root answers nginx with "Permission denied", a 502.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { lookupGroup, lookupUser } from '../../src/config/system-users.js';
import { echoParams, FakePool } from '../helpers/fake-pool.js';
import { httpRequest } from '../helpers/http-client.js';
import { startNginx, type Nginx } from '../helpers/nginx.js';
import { Cleanup } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { startRig } from './support.js';

const user = lookupUser('www-data');
const group = lookupGroup('www-data');
const skip = process.getuid?.() !== 0 || user === undefined || group === undefined ? 'needs root and a www-data account' : false;

describe('Unix socket owner and group, nginx as www-data', { timeout: 60_000, skip }, () => {
  const scope = new Cleanup();
  let nginx: Nginx;
  let owned: string;
  let rootOwned: string;
  let ownerOnly: string;

  before(async () => {
    const dir = makeTempDir(scope, 'fpm-own-');
    chmodSync(dir, 0o755); // www-data must reach the sockets inside
    owned = join(dir, 'owned.sock');
    rootOwned = join(dir, 'root.sock');
    ownerOnly = join(dir, 'owner.sock');
    const pool = new FakePool(echoParams);
    const www = { owner: { id: user!.uid, name: 'www-data' }, group: { id: group!.gid, name: 'www-data' } };
    await startRig(scope, 'scgi', `unix:${owned}`, { pool, cfg: { mode: 0o660, ...www } });
    await startRig(scope, 'scgi', `unix:${rootOwned}`, { pool, cfg: { mode: 0o660 } });
    await startRig(scope, 'scgi', `unix:${ownerOnly}`, { pool, cfg: { owner: www.owner } });
    nginx = await startNginx(
      scope,
      `
    location /owned/ { include /etc/nginx/scgi_params; scgi_pass unix:${owned}; }
    location /root/ { include /etc/nginx/scgi_params; scgi_pass unix:${rootOwned}; }
    location /owner/ { include /etc/nginx/scgi_params; scgi_pass unix:${ownerOnly}; }`,
      { user: 'www-data' },
    );
  });
  after(() => scope.run());

  it('the socket has the configured owner, group and mode', () => {
    const st = statSync(owned);
    assert.equal(st.uid, user!.uid);
    assert.equal(st.gid, group!.gid);
    assert.equal(st.mode & 0o777, 0o660);
    // Without a mode the socket keeps the default 0600, now its new owner's.
    const only = statSync(ownerOnly);
    assert.equal(only.uid, user!.uid);
    assert.equal(only.gid, 0);
    assert.equal(only.mode & 0o777, 0o600);
  });

  it('nginx (www-data) gets the page through the www-data socket', async () => {
    const r = await httpRequest(`${nginx.url}/owned/page`);
    assert.equal(r.status, 200, nginx.errorLog());
    assert.equal(JSON.parse(r.text).REQUEST_URI, '/owned/page');
    assert.equal((await httpRequest(`${nginx.url}/owner/page`)).status, 200, nginx.errorLog());
  });

  it('the same socket left root:root gives nginx a 502 (permission denied)', async () => {
    const r = await httpRequest(`${nginx.url}/root/page`);
    assert.equal(r.status, 502);
    assert.match(nginx.errorLog(), /connect\(\) to unix:\S+root\.sock failed \(13: Permission denied\)/);
  });
});
