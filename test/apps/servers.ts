/**
 * Front-end web servers from Debian's packages, each run privately: its own prefix and
 * config in a fresh temp dir, one loopback port, in the foreground (so it is our child
 * and is stopped by pid), never touching the system's own service or its files.
 *
 * Unlike test/helpers/nginx.ts (which wraps a server body of its own), these take a
 * whole example file: an nginx server block, or a lighttpd / Apache / HAProxy config.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ManagedChild } from '../helpers/child.js';
import type { Scope } from '../helpers/scope.js';
import { makeTempDir } from '../helpers/tmp.js';
import { canConnect, WaitAborted, waitFor } from '../helpers/wait.js';
import { nginxMainConf, nginxPrefix } from '../helpers/nginx.js';
import { worldReadableDir } from '../helpers/world-readable.js';

export const NGINX = '/usr/sbin/nginx';
export const LIGHTTPD = '/usr/sbin/lighttpd';
export const APACHE = '/usr/sbin/apache2';
export const APACHE_MODULES = '/usr/lib/apache2/modules';
export const HAPROXY = '/usr/sbin/haproxy';

export interface FrontEnd {
  name: string;
  port: number;
  url: string;
  dir: string;
  pid: number;
  child: ManagedChild;
  /** The server's error log (or captured stderr), for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

function readQuiet(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

async function run(
  scope: Scope,
  name: string,
  dir: string,
  port: number,
  cmd: string,
  args: string[],
  config: string,
  errorLog: string | undefined,
  stopSignal: NodeJS.Signals = 'SIGTERM',
): Promise<FrontEnd> {
  const child = new ManagedChild(name, cmd, args, { cwd: dir, env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C' } }, stopSignal);
  const log = (): string => (errorLog ? readQuiet(errorLog) : '') + child.stderr;
  const stop = async (): Promise<void> => {
    await child.stop(5000, stopSignal);
  };
  scope.after(stop);
  try {
    await waitFor(
      async () => {
        if (!child.running) throw new WaitAborted(`${name} exited ${JSON.stringify(child.exit)}`);
        return canConnect({ port });
      },
      { timeout: 10_000, what: `${name} on port ${port}` },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\nlog:\n${log()}\nconfig:\n${config}`);
  }
  return { name, port, url: `http://127.0.0.1:${port}`, dir, pid: child.pid, child, log, stop };
}

/** nginx with `site` (one or more `server {}` blocks, already filled in) inside http {}. */
export async function startNginxSite(scope: Scope, site: string, port: number): Promise<FrontEnd> {
  const dir = nginxPrefix(scope);
  // `include fastcgi_params;` in a site file is relative to the main config's directory.
  for (const f of ['fastcgi_params', 'scgi_params']) copyFileSync(join('/etc/nginx', f), join(dir, f));
  writeFileSync(join(dir, 'site.conf'), site);
  const conf = nginxMainConf(dir, `  include ${dir}/site.conf;`, 1024);
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, conf);
  return run(scope, 'nginx', dir, port, NGINX, ['-p', dir, '-e', `${dir}/logs/error.log`, '-c', confPath], `${conf}\n${site}`, join(dir, 'logs', 'error.log'));
}

/**
 * lighttpd in the foreground (-D) with `config` (a whole lighttpd.conf, already filled
 * in); the error log goes to the temp dir.
 */
export async function startLighttpd(scope: Scope, config: string, port: number): Promise<FrontEnd> {
  const dir = makeTempDir(scope, 'fpm-lty-');
  const errorLog = join(dir, 'error.log');
  const conf = `${config}\nserver.errorlog = "${errorLog}"\n`;
  const confPath = join(dir, 'lighttpd.conf');
  writeFileSync(confPath, conf);
  return run(scope, 'lighttpd', dir, port, LIGHTTPD, ['-D', '-f', confPath], conf, errorLog, 'SIGTERM');
}

/**
 * Apache httpd in the foreground with the config `makeConfig(dir)` returns (a whole
 * httpd.conf; `dir` is its private server root). Debian's apache2ctl and /etc/apache2
 * are not used.
 */
export async function startApache(scope: Scope, makeConfig: (dir: string) => string, port: number): Promise<FrontEnd> {
  const dir = makeTempDir(scope, 'fpm-apa-');
  const config = makeConfig(dir);
  const confPath = join(dir, 'httpd.conf');
  writeFileSync(confPath, config);
  return run(scope, 'apache2', dir, port, APACHE, ['-d', dir, '-f', confPath, '-DFOREGROUND'], config, join(dir, 'error.log'), 'SIGTERM');
}

/** A document root the unprivileged children of Apache (user nobody) can read: examples/php's own, or a copy. */
export function worldReadableDocRoot(scope: Scope, publicDir: string): string {
  return join(worldReadableDir(scope, dirname(publicDir)), basename(publicDir));
}

/** HAProxy in the foreground (-db) with `config` (already filled in). */
export async function startHaproxy(scope: Scope, config: string, port: number): Promise<FrontEnd> {
  const dir = makeTempDir(scope, 'fpm-hap-');
  const confPath = join(dir, 'haproxy.cfg');
  writeFileSync(confPath, config);
  return run(scope, 'haproxy', dir, port, HAPROXY, ['-db', '-f', confPath], config, undefined, 'SIGTERM');
}
