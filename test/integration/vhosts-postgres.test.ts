// Sites in a real PostgreSQL table that two daemons share: both serve the sites there at
// start, and a row inserted later (announced by the trigger's NOTIFY) is served by both
// without a restart; a removed row's host gets 404 from both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { FcgiClient, parseCgiOutput, phpParams } from '../helpers/fcgi-client.js';
import { PHP_FLAGS } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { postgresBin, startPostgres } from '../helpers/postgres.js';
import type { Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

const skip = (process.geteuid?.() !== 0 && 'runs as root (postgres runs as its own account, sites as nobody)') || (postgresBin() === undefined && 'no PostgreSQL server installed');

// The schema of docs/vhosts.md, with its trigger: updated_at kept current, NOTIFY on every change.
const SCHEMA = `
CREATE TABLE sites (
  id text PRIMARY KEY,
  names text NOT NULL,
  document_root text NOT NULL,
  pool text NOT NULL DEFAULT '{}',
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE FUNCTION sites_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'DELETE' THEN NEW.updated_at := clock_timestamp(); END IF;
  PERFORM pg_notify(TG_TABLE_NAME, '');
  RETURN COALESCE(NEW, OLD);
END $$;
CREATE TRIGGER sites_changed BEFORE INSERT OR UPDATE OR DELETE ON sites FOR EACH ROW EXECUTE FUNCTION sites_changed();
`;

function makeRoot(base: string, id: string): string {
  const dir = join(base, id);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  writeFileSync(join(dir, 'index.php'), `<?php echo '${id} ', posix_getuid();`, { mode: 0o644 });
  return dir;
}

async function startOne(scope: Scope, url: string): Promise<{ d: Daemon; port: number }> {
  const port = await freePort();
  const d = await startDaemon(
    scope,
    {
      control_socket: 'off',
      listen: [{ protocol: 'fastcgi', address: `127.0.0.1:${port}`, vhosts: true }],
      // A long poll: the new row must arrive through NOTIFY.
      vhosts: { postgres: url, poll_interval: '1h', defaults: { command: ['php-cgi', ...PHP_FLAGS], user: 'nobody', max_children: 1 } },
      log: { level: 'info', access: false },
    },
    { allowRoot: false },
  );
  return { d, port };
}

async function page(port: number, host: string): Promise<{ status: number; body: string }> {
  const c = await FcgiClient.connect({ port });
  try {
    c.request(1, phpParams('/elsewhere', '/index.php', { HTTP_HOST: host }));
    const out = parseCgiOutput((await c.response(1, 20_000)).stdout);
    return { status: out.status, body: out.body.toString() };
  } finally {
    c.socket.destroy();
  }
}

test('two daemons share a PostgreSQL table of sites and both serve a new row', { skip, timeout: 120_000 }, async (t) => {
  const pg = await startPostgres(t);
  await pg.client.query(SCHEMA);
  const base = makeTempDir(t, 'fpm-vhp-');
  chmodSync(base, 0o755);
  const add = (id: string) => pg.client.query('INSERT INTO sites (id, names, document_root) VALUES ($1, $2, $3)', [id, `${id}.test`, makeRoot(base, id)]);
  await add('alpha');

  const a = await startOne(t, pg.url);
  const b = await startOne(t, pg.url);
  for (const { d } of [a, b]) assert.equal((await d.waitForLog((l) => l.kind === 'ready', { timeout: 15_000 })).sites, 1);
  for (const { port } of [a, b]) assert.deepEqual(await page(port, 'alpha.test'), { status: 200, body: 'alpha 65534' });
  for (const { port } of [a, b]) assert.equal((await page(port, 'beta.test')).status, 404);

  await add('beta');
  for (const { port } of [a, b]) {
    await waitFor(async () => (await page(port, 'beta.test')).status === 200, { timeout: 5000, interval: 100, what: 'the new row to be served' });
    assert.equal((await page(port, 'beta.test')).body, 'beta 65534');
  }

  await pg.client.query("DELETE FROM sites WHERE id = 'alpha'");
  for (const { port } of [a, b]) await waitFor(async () => (await page(port, 'alpha.test')).status === 404, { timeout: 5000, interval: 100, what: 'the removed row to be gone' });
});
