/**
 * A private PostgreSQL (Debian's server binaries): its own data directory in a temp dir,
 * run as the `postgres` account (the server refuses root), on loopback at a free port,
 * trust authentication, fsync off; stopped by pid (SIGINT: fast shutdown, which does
 * not wait for clients such as a daemon under test to disconnect).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { ManagedChild } from './child.js';
import { freePort } from './ports.js';
import type { Scope } from './scope.js';
import { makeTempDir } from './tmp.js';
import { canConnect, WaitAborted, waitFor } from './wait.js';

/** The newest installed server, or undefined. */
export function postgresBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const v = readdirSync(base).filter((d) => existsSync(join(base, d, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a))[0];
  return v === undefined ? undefined : join(base, v, 'bin');
}

export interface Postgres {
  url: string;
  pid: number;
  /** A client of its own, ended with the scope. */
  client: pg.Client;
}

export async function startPostgres(scope: Scope): Promise<Postgres> {
  const bin = postgresBin();
  if (bin === undefined) throw new Error('PostgreSQL server binaries not found (apt-get install postgresql)');
  const dir = makeTempDir(scope, 'fpm-pg-');
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o700 });
  const ids = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
  const gid = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
  chownSync(data, Number(ids), Number(gid));
  const asPostgres = ['--reuid=postgres', '--regid=postgres', '--init-groups', '--'];
  execFileSync('setpriv', [...asPostgres, join(bin, 'initdb'), '-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync'], { stdio: 'pipe' });
  const port = await freePort();
  const child = new ManagedChild('postgres', 'setpriv', [...asPostgres, join(bin, 'postgres'), '-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', data, '-F'], {}, 'SIGINT');
  scope.after(() => child.stop(10_000, 'SIGINT'));
  await waitFor(
    async () => {
      if (!child.running) throw new WaitAborted(`postgres exited ${JSON.stringify(child.exit)}: ${child.stderr}`);
      return canConnect({ port });
    },
    { timeout: 20_000, what: `postgres on port ${port}` },
  );
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  // Listening comes before accepting logins ("the database system is starting up"); a Client connects once.
  const client = await waitFor(
    async () => {
      const c = new pg.Client({ connectionString: url });
      c.on('error', () => undefined); // the server stopping at the end of the test
      return c.connect().then(() => c, () => undefined);
    },
    { timeout: 10_000, what: 'postgres to accept logins' },
  );
  scope.after(() => client.end());
  return { url, pid: child.pid, client };
}
