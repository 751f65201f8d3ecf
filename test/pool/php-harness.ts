/**
 * Spawned pools running real php-cgi for pool integration tests: PHP pages in a fresh
 * temp dir, the pool built through createPool with the real worker and endpoint, and
 * requests made as Exchanges with a RecordingSink.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { PoolConfig } from '../../src/config/types.js';
import { createPool, type Pool } from '../../src/pool/index.js';
import { descendantPids } from '../helpers/proc.js';
import { makeTempDir } from '../helpers/tmp.js';
import { makeRequest, poolConfig, recordingLogger, type LogLine, type TestRequest } from './helpers.js';

export const PAGES: Record<string, string> = {
  'pid.php': '<?php header("Content-Type: text/plain"); echo getmypid();',
  'sleep.php': '<?php usleep((int)($_GET["ms"] ?? 100) * 1000); header("Content-Type: text/plain"); echo getmypid();',
  'kill9.php': '<?php header("Content-Type: text/plain"); echo "dying"; flush(); posix_kill(getmypid(), 9); echo "alive?";',
  'segv.php': '<?php posix_kill(getmypid(), 11); echo "alive?";',
};

export interface PhpPool {
  pool: Pool;
  dir: string;
  /** The pool's private runtime dir. */
  runtimeDir: string;
  lines: LogLine[];
  request(page: string, query?: string): TestRequest;
  /** Runs a request to its answer. */
  get(page: string, query?: string): Promise<TestRequest>;
  /** php-cgi processes that are children of this test process, from /proc. */
  processes(): number[];
}

export interface PhpPoolOptions {
  /** PoolDeps.opcacheRoot (default: under the runtime dir). */
  opcacheRoot?: string | false;
  /** Pages in this directory instead of a fresh temp dir (world-readable ones, for pools with a user). */
  dir?: string;
}

export function phpPool(t: TestContext, over: Partial<PoolConfig>, opts: PhpPoolOptions = {}): PhpPool {
  const dir = opts.dir ?? makeTempDir(t, 'fpm-pool-');
  const runtimeDir = join(makeTempDir(t, 'fpm-run-'), 'run');
  mkdirSync(runtimeDir, { mode: 0o700 });
  for (const [name, src] of Object.entries(PAGES)) writeFileSync(join(dir, name), src);
  const { logger, lines } = recordingLogger();
  const cfg = poolConfig({
    name: 'php',
    command: ['/usr/bin/php-cgi', '-d', 'display_errors=stderr', '-d', 'max_execution_time=0'],
    env: { PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' },
    killTimeout: 1000,
    ...over,
  });
  const pool = createPool(cfg, { logger, runtimeDir, opcacheRoot: opts.opcacheRoot });
  const processes = (): number[] => descendantPids(process.pid, 'php-cgi');
  // The pool's timers are unref'd (a daemon's listeners keep it alive); here nothing
  // else would while a request waits for a restart back-off.
  const keepAlive = setInterval(() => {}, 1 << 30);
  t.after(async () => {
    clearInterval(keepAlive);
    await pool.stop(0);
    // Belt and braces: nothing this test started may outlive it.
    for (const pid of processes()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
  const request = (page: string, query = ''): TestRequest => {
    const r = makeRequest({
      SCRIPT_FILENAME: join(dir, page),
      SCRIPT_NAME: `/${page}`,
      REQUEST_URI: `/${page}${query ? `?${query}` : ''}`,
      QUERY_STRING: query,
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: 'HTTP/1.1',
      SERVER_NAME: 'localhost',
      REMOTE_ADDR: '127.0.0.1',
    });
    pool.dispatch(r.ex);
    return r;
  };
  const get = async (page: string, query = ''): Promise<TestRequest> => {
    const r = request(page, query);
    await r.sink.answered;
    return r;
  };
  return { pool, dir, runtimeDir, lines, request, get, processes };
}
