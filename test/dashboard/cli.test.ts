// `fcgi-pm dashboard --peers …` as a real process over two daemons: one read through its
// control socket, one through its own dashboard over HTTP (peer_token); an edit sent to
// the HTTP peer is done by that daemon (its file, its reload). The daemon's dashboard
// also takes basic-auth users with scrypt hashes, and the login form for them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runBin } from '../cli/helpers.js';
import { ManagedChild } from '../helpers/child.js';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { FCGI_PM_BIN, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { phpCommand } from '../helpers/spawned.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, waitFor } from '../helpers/wait.js';
import { hashPassword } from '../../src/dashboard/auth.js';

const TOKEN_A = 'token-of-daemon-a-0123456789';
const TOKEN_CLI = 'token-of-the-cli-0123456789';

const basic = (u: string, p: string): string => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;

test('fcgi-pm dashboard over a control socket and an HTTP peer; users with scrypt hashes', { timeout: 90_000 }, async (t) => {
  const dirA = makeTempDir(t, 'fpm-dcli-a-');
  const dirB = makeTempDir(t, 'fpm-dcli-b-');
  const [portA, portB, dashA, dashCli, nobody] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  const pool = (dir: string, m: string) => ({ www: { command: phpCommand(dir, m), pm: 'ondemand', max_children: 2 } });
  const a = await startDaemon(t, {
    control_socket: join(dirA, 'control.sock'),
    listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${portA}`, pool: 'www' }],
    pools: pool(dirA, 'dcli-a'),
    dashboard: { address: `127.0.0.1:${dashA}`, token: TOKEN_A, users: { ops: hashPassword('s3cret pass') } },
  }, { dir: dirA });
  const controlB = join(dirB, 'control.sock');
  const b = await startDaemon(t, { control_socket: controlB, listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${portB}`, pool: 'www' }], pools: pool(dirB, 'dcli-b') }, { dir: dirB });
  await waitFor(() => canConnect({ port: dashA, host: '127.0.0.1' }), { what: "a's dashboard" });

  // Users: Basic auth and the login form; a wrong password is refused like no password.
  const baseA = `http://127.0.0.1:${dashA}`;
  assert.equal((await httpRequest(`${baseA}/api/cluster`, { headers: { authorization: basic('ops', 's3cret pass') } })).status, 200);
  const since = a.mark();
  const wrong = await httpRequest(`${baseA}/api/cluster`, { headers: { authorization: basic('ops', 's3cret pasS') } });
  assert.equal(wrong.status, 401);
  assert.match(String(wrong.headers['www-authenticate']), /^Basic realm=/);
  assert.equal((await httpRequest(`${baseA}/api/cluster`, { headers: { authorization: basic('nobody', 's3cret pass') } })).status, 401);
  await a.waitForLog((l) => l.code === 'ERR_DASHBOARD_AUTH', { since, what: 'ERR_DASHBOARD_AUTH' });
  const form = await httpRequest(`${baseA}/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'user=ops&password=s3cret+pass' });
  assert.equal(form.status, 303);
  const cookie = String(form.headers['set-cookie']?.[0]).split(';')[0]!;
  assert.match(form.headers['set-cookie']![0]!, /HttpOnly; SameSite=Strict/);
  assert.equal((await httpRequest(`${baseA}/`, { headers: { cookie } })).status, 200);
  assert.equal((await httpRequest(`${baseA}/`, { headers: { cookie: 'fcgipm_dash=forged' } })).status, 401);
  // The page and its assets, as sent: well under 200 KB.
  let bytes = 0;
  for (const path of ['/', '/app.js', '/app.css']) {
    const r = await httpRequest(`${baseA}${path}`, { headers: { cookie } });
    assert.equal(r.status, 200, path);
    bytes += r.body.length;
  }
  assert.ok(bytes < 200 * 1024, `${bytes} bytes`);
  const badForm = await httpRequest(`${baseA}/login`, { method: 'POST', body: 'user=ops&password=nope' });
  assert.equal(badForm.status, 401);
  assert.equal(badForm.headers['set-cookie'], undefined);

  // The CLI's dashboard: no daemon of its own, the two peers.
  const peers = `${controlB},http://127.0.0.1:${dashA},http://127.0.0.1:${nobody}`;
  const cli = new ManagedChild('fcgi-pm dashboard', process.execPath, [FCGI_PM_BIN, 'dashboard', '--peers', peers, '--peer-token', TOKEN_A, '--token', TOKEN_CLI, '--address', `127.0.0.1:${dashCli}`, '--interval', '500ms'], { cwd: REPO_ROOT });
  t.after(() => cli.stop());
  await waitFor(() => canConnect({ port: dashCli, host: '127.0.0.1' }), { what: 'the CLI dashboard' });
  const auth = { authorization: `Bearer ${TOKEN_CLI}` };
  const base = `http://127.0.0.1:${dashCli}`;
  assert.equal((await httpRequest(`${base}/api/cluster`)).status, 401);
  const cluster = JSON.parse((await httpRequest(`${base}/api/cluster`, { headers: auth })).body.toString()) as { daemons: Array<{ id: string; up: boolean; reason?: string; snapshot?: { daemon: { pid: number } } }>; pools: Record<string, string[]> };
  assert.deepEqual(cluster.daemons.map((d) => [d.id, d.up, d.snapshot?.daemon.pid ?? d.reason]), [[controlB, true, b.pid], [`http://127.0.0.1:${dashA}`, true, a.pid], [`http://127.0.0.1:${nobody}`, false, 'connection refused']]);
  assert.deepEqual(cluster.pools.www, [controlB, `http://127.0.0.1:${dashA}`]);
  assert.equal((await httpRequest(`${base}/api/snapshot`, { headers: auth })).status, 404, 'no local daemon');

  // An edit on the HTTP peer: validated and done by that daemon.
  const edit = (settings: Record<string, unknown>) => httpRequest(`${base}/api/edit`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ targets: [`http://127.0.0.1:${dashA}`], pool: 'www', settings }) });
  const bad = JSON.parse((await edit({ max_children: 0 })).body.toString()) as { applied: boolean; results: Array<{ ok: boolean; problems: string[] }> };
  assert.equal(bad.applied, false);
  assert.match(bad.results[0]!.problems[0]!, /fcgi-pm\.yaml:\d+: pools\.www\.max_children: /);
  const good = JSON.parse((await edit({ max_children: 4 })).body.toString()) as { applied: boolean; results: Array<{ ok: boolean; reload?: { ok: boolean } }> };
  assert.equal(good.applied, true, JSON.stringify(good));
  assert.equal(good.results[0]!.reload?.ok, true);
  assert.match(readFileSync(a.configPath, 'utf8'), /max_children: 4/);
  // Every refusal above (three wrong credentials, a forged cookie, a wrong login form) was one
  // episode: one warning line, logged before this later line.
  const changed = await a.waitForLog((l) => /dashboard: pool www changed/.test(String(l.msg)), { since, what: 'the edit line' });
  assert.equal(a.logsSince(since).slice(0, a.logs.indexOf(changed) - since).filter((l) => l.code === 'ERR_DASHBOARD_AUTH').length, 1);
  const st = await runBin(['status', '--json', '--control', join(dirA, 'control.sock')]);
  assert.equal((JSON.parse(st.stdout) as { pools: Array<{ maxChildren: number }> }).pools[0]!.maxChildren, 4);
  // Only the daemons it shows: no socket or URL of the caller's choosing (peer_token would go there).
  const stray = await httpRequest(`${base}/api/reload`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ targets: ['http://127.0.0.1:1/'] }) });
  assert.equal(stray.status, 400);
  assert.match(stray.body.toString(), /not a daemon of this dashboard: http:\/\/127\.0\.0\.1:1\//);
  // JSON only: a form post from another site cannot change anything.
  assert.equal((await httpRequest(`${base}/api/reload`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, body: 'targets=self' })).status, 415);
});
