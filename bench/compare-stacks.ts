/**
 * The servers the comparison runs, each with its own config in a private temp dir:
 * php-fpm (its own config, never the system service), fcgi-pm, spawn-fcgi + php-cgi,
 * and one nginx in front of them all. Every process is tracked by pid (compare-procs).
 */
import { execFileSync, type SpawnOptions } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canConnect, sleep, start, stopPid, track, untrack, waitReady, type Started } from './compare-procs.js';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(REPO, 'bin', 'fcgi-pm');

export function findPhpFpm(): string {
  for (const f of readdirSync('/usr/sbin')) if (/^php-fpm[\d.]*$/.test(f)) return join('/usr/sbin', f);
  throw new Error('php-fpm is not installed (bench/compare.sh installs it)');
}

/** The pages: 100 bytes, 8,750 bytes, and one that sleeps 50 ms. */
export function writePages(doc: string): void {
  mkdirSync(doc, { recursive: true });
  writeFileSync(join(doc, 'p100.php'), "<?php echo str_repeat('x', 100);\n");
  writeFileSync(join(doc, 'p8750.php'), "<?php echo str_repeat('y', 8750);\n");
  writeFileSync(join(doc, 'sleep50.php'), "<?php usleep(50000); echo 'slept';\n");
  writeFileSync(join(doc, 'sleep100.php'), "<?php usleep(100000); echo 'slept';\n");
}

export interface Server {
  name: string;
  pid: number;
  /** The FastCGI socket nginx talks to. */
  sock: string;
  stop(): Promise<void>;
}

export interface FpmOptions {
  pm: 'static' | 'ondemand';
  workers: number;
  idleTimeoutS?: number;
}

export async function startPhpFpm(dir: string, o: FpmOptions): Promise<Server> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'fpm.sock');
  const conf = `
[global]
pid = ${dir}/fpm.pid
error_log = ${dir}/fpm-error.log
daemonize = no
[bench]
user = ${process.getuid?.() === 0 ? 'root' : ''}
listen = ${sock}
pm = ${o.pm}
pm.max_children = ${o.workers}
pm.max_requests = 0
${o.pm === 'ondemand' ? `pm.process_idle_timeout = ${o.idleTimeoutS ?? 1}s` : ''}
`.replace(/^user = \n/m, '');
  writeFileSync(join(dir, 'php-fpm.conf'), conf);
  const args = ['-F', '-y', join(dir, 'php-fpm.conf'), '-p', dir];
  if (process.getuid?.() === 0) args.push('-R');
  // SIGQUIT is php-fpm's graceful stop; SIGTERM its fast one. Either stops the workers.
  const p = start('php-fpm', findPhpFpm(), args, {}, 'SIGTERM');
  await waitReady('php-fpm', { path: sock }, p);
  return { name: 'php-fpm', pid: p.pid, sock, stop: () => p.stop() };
}

export interface FcgiPmOptions {
  pm: 'static' | 'ondemand';
  workers: number;
  httpPort?: number;
  idleTimeout?: string;
  queueTimeout?: string;
  command?: string[];
  /** Run `node ARGS bin/fcgi-pm` with these, instead of bin/fcgi-pm as a program. */
  nodeArgs?: string[];
  /** bin/fcgi-pm's V8 flags for the daemon (FCGI_PM_NODE_FLAGS); default: its own. */
  nodeFlags?: string;
  /** Another built checkout to run fcgi-pm from (a baseline to compare against); default: this one. */
  repo?: string;
  /** accept: direct: the workers accept on `directSock` themselves; `sock` is the overflow listener. */
  direct?: boolean;
  /** direct_backlog (default: fcgi-pm's, 511). */
  directBacklog?: number;
  /** max_requests (default: none). */
  maxRequests?: number;
  /** More pool keys, YAML lines without their indent (e.g. "cpu_weight: 0"). */
  poolKeys?: string[];
}

export async function startFcgiPm(dir: string, doc: string, o: FcgiPmOptions): Promise<Server & { httpPort: number | undefined; proc: Started; directSock: string }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'fcgi-pm.sock');
  const directSock = join(dir, 'direct.sock');
  const direct = o.direct === true ? `    accept: direct\n    direct_listen: "unix:${directSock}"\n    direct_socket_mode: "0666"\n${o.directBacklog !== undefined ? `    direct_backlog: ${o.directBacklog}\n` : ''}` : '';
  const listen: string[] = [`  - { protocol: fastcgi, address: "unix:${sock}", pool: php }`];
  if (o.httpPort !== undefined) listen.push(`  - { protocol: http, address: "127.0.0.1:${o.httpPort}", pool: php, document_root: "${doc}" }`);
  const conf = `listen:
${listen.join('\n')}
pools:
  php:
    command: ${JSON.stringify(o.command ?? ['/usr/bin/php-cgi'])}
    pm: ${o.pm}
    max_children: ${o.workers}
${direct}${(o.poolKeys ?? []).map((k) => `    ${k}\n`).join('')}${o.maxRequests !== undefined ? `    max_requests: ${o.maxRequests}\n` : ''}${o.idleTimeout !== undefined ? `    idle_timeout: ${o.idleTimeout}\n` : ''}${o.queueTimeout !== undefined ? `    queue_timeout: ${o.queueTimeout}\n` : ''}log: { level: warn, access: false }
runtime_dir: ${dir}
`;
  writeFileSync(join(dir, 'fcgi-pm.yaml'), conf);
  // The bench runs as root on a bench box: its php-cgi workers run as root on purpose.
  const args = ['run', '-c', join(dir, 'fcgi-pm.yaml'), '--allow-root'];
  // Executed as a program, as operators run it, bin/fcgi-pm starts the daemon with its heap flags.
  const env = { ...process.env, ...(o.nodeFlags !== undefined ? { FCGI_PM_NODE_FLAGS: o.nodeFlags } : {}) };
  const bin = o.repo === undefined ? BIN : join(o.repo, 'bin', 'fcgi-pm');
  const p = o.nodeArgs !== undefined ? start('fcgi-pm', process.execPath, [...o.nodeArgs, bin, ...args], { cwd: dir }) : start('fcgi-pm', bin, args, { cwd: dir, env });
  await waitReady('fcgi-pm', { path: sock }, p);
  if (o.httpPort !== undefined) await waitReady('fcgi-pm http', { port: o.httpPort }, p);
  if (o.direct === true) await waitReady('fcgi-pm direct socket', { path: directSock }, p);
  return { name: 'fcgi-pm', pid: p.pid, sock, directSock, httpPort: o.httpPort, proc: p, stop: () => p.stop(10_000) };
}

/** The floor (bench/relay-floor.ts): a minimal relay with one kept-alive connection per php-cgi. */
export async function startFloor(dir: string, workers: number): Promise<Server & { proc: Started }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'floor.sock');
  const p = start('relay-floor', process.execPath, [join(REPO, 'dist', 'bench', 'relay-floor.js'), '--listen', `unix:${sock}`, '--workers', String(workers)]);
  await waitReady('relay-floor', { path: sock }, p);
  return { name: 'relay-floor', pid: p.pid, sock, proc: p, stop: () => p.stop() };
}

/** spawn-fcgi forks `workers` php-cgi processes on one socket and exits; we track their pids. */
export async function startSpawnFcgi(dir: string, workers: number): Promise<Server & { pids: number[] }> {
  mkdirSync(dir, { recursive: true });
  const sock = join(dir, 'spawn.sock');
  const out = execFileSync('spawn-fcgi', ['-s', sock, '-M', '0600', '-F', String(workers), '--', '/usr/bin/php-cgi'], {
    env: { ...process.env, PHP_FCGI_CHILDREN: '0', PHP_FCGI_MAX_REQUESTS: '0' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pids = [...out.matchAll(/PID: (\d+)/g)].map((m) => Number(m[1]));
  for (const pid of pids) track(pid, 'php-cgi (spawn-fcgi)');
  if (pids.length !== workers) throw new Error(`spawn-fcgi started ${pids.length} of ${workers} processes:\n${out}`);
  const deadline = Date.now() + 10_000;
  while (!(await canConnect({ path: sock }))) {
    if (Date.now() > deadline) throw new Error('spawn-fcgi socket not ready');
    await sleep(20);
  }
  return {
    name: 'spawn-fcgi',
    pid: pids[0]!,
    pids,
    sock,
    stop: async () => {
      await Promise.all(pids.map((pid) => stopPid(pid)));
    },
  };
}

export interface NginxServer {
  port: number;
  /** "unix:/path" */
  upstream: string;
  keepAlive: boolean;
  /** An upstream block with `upstream` as primary (max_fails=0) and this as nginx's backup server. */
  backup?: string;
}

export async function startNginx(dir: string, doc: string, servers: NginxServer[]): Promise<{ pid: number; stop(): Promise<void> }> {
  const blocks = servers.map((s, i) => {
    const up = s.backup !== undefined ? `upstream up${i} { server ${s.upstream} max_fails=0; server ${s.backup} backup; }` : s.keepAlive ? `upstream up${i} { server ${s.upstream}; keepalive 64; }` : '';
    const pass = s.backup !== undefined ? `fastcgi_pass up${i};` : s.keepAlive ? `fastcgi_pass up${i}; fastcgi_keep_conn on;` : `fastcgi_pass ${s.upstream};`;
    return `${up}
  server {
    listen 127.0.0.1:${s.port} backlog=4096;
    root ${doc};
    location ~ \\.php$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      ${pass}
    }
  }`;
  });
  const p = await runNginx(dir, blocks, servers.map((s) => s.port));
  return { pid: p.pid, stop: () => p.stop() };
}

/**
 * nginx in the foreground with its own prefix `dir` (temp paths, pid, error log) and
 * `blocks` (upstream and server blocks) in http {}; ready once every port accepts.
 */
/** `spawnOpts.detached`: nginx in a session of its own, as a service runs (its own autogroup: the CPU is shared with it as with a service). */
/** nginx with `blocks` in its http block; `workers`: worker_processes (1 unless an A/B asks for more). */
export async function runNginx(dir: string, blocks: string[], ports: number[], spawnOpts: SpawnOptions = {}, workers = 1): Promise<Started> {
  for (const d of ['logs', 'client_body', 'fastcgi', 'scgi', 'uwsgi', 'proxy']) mkdirSync(join(dir, d), { recursive: true });
  const conf = `${process.getuid?.() === 0 ? 'user root root;' : ''}
daemon off;
master_process on;
worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  fastcgi_temp_path ${dir}/fastcgi;
  scgi_temp_path ${dir}/scgi;
  uwsgi_temp_path ${dir}/uwsgi;
  proxy_temp_path ${dir}/proxy;
  keepalive_requests 1000000;
  ${blocks.join('\n  ')}
}
`;
  writeFileSync(join(dir, 'nginx.conf'), conf);
  const p = start('nginx', '/usr/sbin/nginx', ['-p', dir, '-e', `${dir}/logs/error.log`, '-c', join(dir, 'nginx.conf')], spawnOpts);
  for (const port of ports) await waitReady('nginx', { port }, p);
  return p;
}

export function nginxErrors(dir: string): string {
  try {
    return readFileSync(join(dir, 'logs', 'error.log'), 'utf8');
  } catch {
    return '';
  }
}

export { untrack };
