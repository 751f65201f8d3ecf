/**
 * A private nginx: its own prefix dir, pid file, error log and temp paths, one loopback
 * port, `daemon off` so the master is our child and is stopped by pid.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManagedChild } from './child.js';
import { NGINX, PHP_FIXTURES } from './paths.js';
import { freePort } from './ports.js';
import type { Scope } from './scope.js';
import { makeTempDir } from './tmp.js';
import { canConnect, WaitAborted, waitFor } from './wait.js';

export interface Nginx {
  port: number;
  /** "http://127.0.0.1:PORT" */
  url: string;
  dir: string;
  pid: number;
  errorLog(): string;
  stop(): Promise<void>;
}

/**
 * A fresh private nginx prefix: temp dirs nginx writes to, and the main config around
 * `http` (directives and server blocks). Shared by every test that starts nginx.
 */
export function nginxPrefix(scope: Scope): string {
  const dir = makeTempDir(scope, 'fpm-ngx-');
  for (const d of ['logs', 'client_body', 'fastcgi', 'scgi', 'uwsgi', 'proxy']) mkdirSync(join(dir, d));
  return dir;
}

/**
 * `user`: the account nginx's workers run as when started by root (Debian runs them as
 * www-data); by default root, since "nobody" could not reach our 0700 temp dirs.
 */
export function nginxMainConf(dir: string, http: string, workerConnections = 2048, workerUser = 'root'): string {
  const user = process.getuid?.() === 0 ? `user ${workerUser} ${workerUser};` : '';
  return `
${user}
daemon off;
master_process on;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log info;
events { worker_connections ${workerConnections}; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path ${dir}/client_body;
  fastcgi_temp_path ${dir}/fastcgi;
  scgi_temp_path ${dir}/scgi;
  uwsgi_temp_path ${dir}/uwsgi;
  proxy_temp_path ${dir}/proxy;
${http}
}
`;
}

/**
 * `serverBody` goes inside `server { listen 127.0.0.1:PORT; ... }`; `httpExtra` goes in
 * the http block (e.g. `upstream` blocks).
 */
export async function startNginx(scope: Scope, serverBody: string, opts: { httpExtra?: string; user?: string } = {}): Promise<Nginx> {
  const dir = nginxPrefix(scope);
  const port = await freePort();
  const conf = nginxMainConf(
    dir,
    `  client_max_body_size 64m;
  keepalive_requests 100000;
  ${opts.httpExtra ?? ''}
  server {
    listen 127.0.0.1:${port};
    server_name localhost;
    ${serverBody}
  }`,
    2048,
    opts.user,
  );
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, conf);
  const child = new ManagedChild('nginx', NGINX, ['-p', dir, '-e', `${dir}/logs/error.log`, '-c', confPath], {}, 'SIGTERM');
  const stop = async (): Promise<void> => {
    // SIGTERM is nginx's fast shutdown; the master stops its worker before exiting.
    await child.stop(5000);
  };
  scope.after(stop);
  const errorLog = (): string => {
    try {
      return readFileSync(join(dir, 'logs', 'error.log'), 'utf8');
    } catch {
      return '';
    }
  };
  try {
    await waitFor(
      async () => {
        if (!child.running) throw new WaitAborted(`nginx exited ${JSON.stringify(child.exit)}: ${child.stderr}`);
        return canConnect({ port });
      },
      { timeout: 10_000, what: `nginx on port ${port}` },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\nerror.log:\n${errorLog()}\nconf:\n${conf}`);
  }
  return { port, url: `http://127.0.0.1:${port}`, dir, pid: child.pid, errorLog, stop };
}

/**
 * One catch-all server passing every host and path to a fcgi-pm vhosts listener on
 * `port`, which picks the site (and its root: nginx's own root is never read).
 */
export function startNginxForSites(scope: Scope, port: number): Promise<Nginx> {
  return startNginx(
    scope,
    `root /nonexistent;
    location / {
      fastcgi_pass 127.0.0.1:${port};
      ${fastcgiParams()}
    }`,
  );
}

/**
 * nginx serving PHP_FIXTURES' .php pages through kept-alive FastCGI connections
 * (`fastcgi_keep_conn`, an upstream with `keepalive`) to a fcgi-pm listener on `port`;
 * `locations` go before the .php one (nginx picks the first regex that matches).
 */
export function startNginxKeptAlive(scope: Scope, port: number, opts: { keepalive: number; readTimeout?: string; locations?: string }): Promise<Nginx> {
  return startNginx(
    scope,
    `root ${PHP_FIXTURES};${opts.locations ?? ''}
    location ~ \\.php$ {
      fastcgi_pass fcgipm;
      fastcgi_keep_conn on;${opts.readTimeout === undefined ? '' : `
      fastcgi_read_timeout ${opts.readTimeout};`}
      ${fastcgiParams()}
    }`,
    { httpExtra: `upstream fcgipm { server 127.0.0.1:${port}; keepalive ${opts.keepalive}; }` },
  );
}

/** A location that passes /unix/NAME.php to fcgi-pm's Unix listener `sock` (for startNginxKeptAlive's `locations`). */
export function unixPhpLocation(sock: string): string {
  return `
    location ~ ^/unix/(.*\\.php)$ {
      fastcgi_pass unix:${sock};
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root/$1;
    }`;
}

/**
 * nginx in front of an `accept: direct` pool as docs/direct.md shows it: everything to
 * PHP (the guard in the worker decides), the pool's Unix socket `sock` first, its
 * overflow listener on 127.0.0.1:`port` as the backup.
 */
export function startNginxDirect(scope: Scope, root: string, sock: string, port: number, readTimeout = '30s'): Promise<Nginx> {
  return startNginx(
    scope,
    `root ${root};
    location / {
      fastcgi_pass direct;
      fastcgi_read_timeout ${readTimeout};
      ${fastcgiParams()}
    }`,
    { httpExtra: `upstream direct { server unix:${sock} max_fails=0; server 127.0.0.1:${port} backup; }` },
  );
}

/** fastcgi_param lines for a PHP location served from `root`. */
export function fastcgiParams(): string {
  return `
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;`;
}

/** scgi_param lines for the same (nginx adds CONTENT_LENGTH itself). */
export function scgiParams(): string {
  return `
      include /etc/nginx/scgi_params;
      scgi_param SCRIPT_FILENAME $document_root$uri;
      scgi_param SCRIPT_NAME $uri;
      scgi_param REDIRECT_STATUS 200;
      scgi_param GATEWAY_INTERFACE CGI/1.1;
      scgi_param SERVER_SOFTWARE nginx;`;
}
