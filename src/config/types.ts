/**
 * The validated configuration. Durations are milliseconds, sizes are bytes.
 * Keys are snake_case in the file and camelCase here; src/config/schema.ts maps them.
 */
import type { SocketAddress } from '../protocol/address.js';
import type { LOG_FORMATS } from './keys.js';

/** A user or group as configured (name or number) and its numeric id. */
export interface AccountId {
  id: number;
  name: string;
}
import type { ConfigOrigin } from './problems.js';

export type FrontProtocol = 'fastcgi' | 'scgi' | 'http';
export type BackendProtocol = 'fastcgi' | 'scgi';

export interface ListenerConfig {
  protocol: FrontProtocol;
  address: SocketAddress;
  pool: string;
  /** FastCGI authorizer requests go to this pool instead of `pool` (undefined: to `pool`). */
  authorizerPool?: string;
  /** Unix socket file mode, e.g. 0o660. */
  mode: number | undefined;
  /** Unix socket owner and group, resolved from names at load (src/config/system-users.ts). */
  owner?: AccountId | undefined;
  group?: AccountId | undefined;
  /** TCP only: client rules (addresses, CIDR blocks; src/config/cidr.ts); undefined = any client. */
  allowedClients?: string[] | undefined;
  /** HTTP only: where SCRIPT_FILENAME points, and the index script for directory URLs. */
  documentRoot: string | undefined;
  index: string;
  /** HTTP only: chunked bodies are buffered, this many bytes in memory, the rest in a temp file. */
  bodyBufferSize: number;
  /** HTTP only: larger request bodies get 413. */
  maxBodySize: number;
  /** Close a front-end connection that sends nothing for this long (default 60s). */
  idleTimeout: number;
  /** A request head must be complete this long after its first byte (default 60s). */
  headerTimeout: number;
  /** FastCGI/SCGI: a request body with no byte for this long is a client timeout (default 60s). */
  bodyTimeout: number;
  /** Max simultaneous front-end connections (FCGI_MAX_CONNS; default 1024); more get an overload answer. */
  maxConns: number;
  /** listen() backlog; undefined = net.core.somaxconn. */
  backlog?: number | undefined;
  /** Extra or overriding CGI params given to every request from this listener. */
  params: Record<string, string>;
  /** Route by host to the sites of Config.vhosts (optional so configs built in code may leave it out). */
  vhosts?: boolean;
  /** After the site's own rules (src/frontend/rewrite.ts). */
  rewrite?: RewriteRule[] | undefined;

  // Operations. Optional so configs built in code may leave them out;
  // schema.ts always sets pingResponse and statusAllow.
  /** Matched against systemd's LISTEN_FDNAMES for socket activation. */
  name?: string | undefined;
  /** Requests for this path get the status page from the daemon itself. */
  statusPath?: string | undefined;
  pingPath?: string | undefined;
  /** 200 while serving, 503 while stopping (src/control/readiness.ts). */
  readyPath?: string | undefined;
  pingResponse?: string;
  /** Client rules for status/ping (src/config/cidr.ts); default loopback, unix, local. */
  statusAllow?: string[];
}

export type PmMode = 'static' | 'dynamic' | 'ondemand';

export interface PoolConfig {
  name: string;
  /** Protocol the backends speak. */
  backend: BackendProtocol;
  /** External backends. Empty when `command` is set. */
  backends: SocketAddress[];
  maxConnsPerBackend: number; // default 16
  /** How long a refusing backend is skipped (default 5s). */
  backendDownTime: number;
  connectTimeout: number; // default 5s
  /** No byte from the backend for this long → 504 (default 60s). */
  readTimeout: number;
  keepAlive: boolean; // default true
  /** FastCGI: role FCGI_AUTHORIZER as such, or as a responder request with FCGI_ROLE=AUTHORIZER (default native). */
  authorizerRole?: 'native' | 'responder';

  // Spawned workers. `command` undefined → external backends only.
  command: string[] | undefined;
  socket: 'fd0' | 'argv';
  env: Record<string, string>;
  inheritEnv: string[];
  cwd: string | undefined;
  user: string | undefined;
  group: string | undefined;
  /** direct: workers accept on `directListen` themselves (src/pool/direct/). */
  accept?: 'proxy' | 'direct';
  directListen?: SocketAddress | undefined;
  /** listen() backlog of the direct socket; schema sets max_children when unset. */
  directBacklog?: number | undefined;
  directSocketMode?: number;
  pm: PmMode; // default ondemand
  maxChildren: number; // default 5
  /** Workers are forks of one parent that imported the application (bin/fcgi-pm-wsgi --preload). */
  preload?: boolean;
  /** ms without workers before the preload parent stops; 0 = never. */
  preloadIdleTimeout?: number;
  /** php-cgi: a file cache of the pool's own for opcache (src/worker/php-cache.ts); default true. */
  opcacheFileCache?: boolean;
  /** Seats per worker: one php-cgi parent with PHP_FCGI_CHILDREN=k (unset: 1, or max_children with resident_parent). */
  groupSize?: number;
  /** php-cgi: the workers are forks of one parent, kept paused when the pool scales to zero (warm zero); auto: src/pool/resident.ts decides. */
  residentParent?: boolean | 'auto';
  startChildren: number; // dynamic; default min_spare
  minSpare: number; // default 1
  maxSpare: number; // default 3
  maxSpawnRate: number; // default 32
  spawnTimeout: number; // default 10s
  idleTimeout: number; // default 10s
  maxRequests: number; // 0 = never
  maxRequestsJitter: number;
  maxLifetime: number; // 0 = never
  requestTimeout: number; // 0 = never
  slowRequest: number; // 0 = off
  killTimeout: number; // default 5s
  crashLimit: number; // default 5
  crashWindow: number; // default 60s
  queueLimit: number; // default 1024
  queueTimeout: number; // default 5s
  /** Spawned pools: longest expected wait a request is queued for (0 = off); optional for configs built in code. */
  queueMaxWait?: number;

  // Memory governor. Optional so configs built in code may leave them out;
  // schema.ts always sets them. Sizes in bytes, 0 = off.
  maxMemory?: number;
  maxMemoryHard?: number;
  memoryLimit?: number;
  /** Assumed size of a new worker before any was measured (default 32 MiB). */
  expectedWorkerMemory?: number;
  rlimitAs?: number;
  /** RLIMIT_NOFILE and RLIMIT_CORE of workers (prlimit), undefined = fcgi-pm's own. */
  rlimitFiles?: number | undefined;
  rlimitCore?: number | undefined;
  /** Workers' nice value, undefined = fcgi-pm's own. */
  processPriority?: number | undefined;
  /** php-cgi settings, as -d NAME=VALUE: php_value may be changed by a script, php_admin not. */
  phpValue?: Record<string, string> | undefined;
  phpAdmin?: Record<string, string> | undefined;
  /** undefined = the top-level memory_sample_interval. */
  memorySampleInterval?: number | undefined;

  // Which files may run (src/frontend/script-guard.ts). schema.ts fills the php-cgi default.
  /** Extensions SCRIPT_FILENAME must end in (".php"); empty or undefined = any file. */
  limitExtensions?: string[] | undefined;
  /** Directories SCRIPT_FILENAME must resolve into; empty or undefined = anywhere. */
  scriptRoots?: string[] | undefined;
  /** Workers' oom_score_adj (default 800). */
  oomScoreAdj?: number;
  /** The pool's CPU weight against other pools (1-10000, default 100; 0 = no CPU cgroup; src/memory/cpu-cgroup.ts). */
  cpuWeight?: number;
  /** ms: the workers' CPU slice while requests wait for them (default 10; 0 = off; src/pool/workers/busy-slice.ts). */
  busyCpuSlice?: number;

  // Authorization in front of the pool (src/frontend/authorize.ts).
  /** Pool asked, as a FastCGI authorizer, before each request is dispatched here. */
  authorizer?: string | undefined;
  /** ms a grant is kept; 0 or undefined = no cache. */
  authorizerCache?: number;
  /** Variables whose values make the cache key; NAME/N keeps N path segments. */
  authorizerCacheKey?: string[];
  /** Every request runs this file (SCRIPT_FILENAME). */
  script?: string | undefined;
}

/** memory_budget as written: bytes, a percentage of MemTotal, or a share of MemAvailable at start. */
export type MemoryBudgetSetting = { kind: 'bytes'; bytes: number } | { kind: 'percent'; percent: number } | { kind: 'auto' };

export interface LimitsConfig {
  /** Total bytes of request variables (FastCGI PARAMS / SCGI header). Default 64 KiB. */
  maxParamsBytes: number;
  maxParamsCount: number; // default 1000
}

export interface Config {
  /** Absolute path of the file it was read from, or '<command line>'. */
  source: string;
  listen: ListenerConfig[];
  pools: Map<string, PoolConfig>;
  limits: LimitsConfig;
  log: {
    level: string;
    /** auto | json | pretty (src/log/pretty.ts). */
    format: (typeof LOG_FORMATS)[number];
    access: boolean;
    /** Log file instead of stdout; reopened on SIGUSR1. */
    file?: string | undefined;
    /** Access lines to their own file instead of the main log. */
    accessFile?: string | undefined;
    /** 'json', 'fpm' or a %-format (src/config/access-format.ts). Default 'json'. */
    accessFormat?: string;
  };
  /** How long SIGTERM waits for in-flight requests (default 30s). */
  shutdownTimeout: number;
  /** ms of serving on after a stop signal, with readiness failing (0: close the listeners at once). */
  shutdownDelay: number;
  /** Private directory for worker sockets (default: a fresh 0700 dir under the OS tmpdir). */
  runtimeDir: string | undefined;
  /** Root of php-cgi pools' opcache file caches; false = off; undefined = the default (src/config/opcache-path.ts). */
  opcacheDir?: string | false | undefined;
  /** Host memory budget shared by all pools (undefined = none). */
  memoryBudget?: MemoryBudgetSetting | undefined;
  /** max_children_total: workers across all pools, shared fairly (0 / undefined = off). */
  maxChildrenTotal?: number;
  /** fcgi-pm's own CPU weight beside its pools' CPU cgroups (default 300; 0 = leave it; src/memory/cpu-cgroup.ts). */
  daemonCpuWeight?: number;
  /** fcgi-pm's event loop on the shortest CPU slice (default true; src/memory/cpu-slice.ts). */
  daemonShortSlice?: boolean;
  /** How often workers are measured (default 2s). */
  memorySampleInterval?: number;
  /** fcgi-pm's own oom_score_adj where it may lower it (default -500). */
  oomScoreAdj?: number;
  /** Control socket path; false = off; undefined = the default (src/config/control-path.ts). */
  controlSocket?: string | false | undefined;
  /** Default 0o600. */
  controlSocketMode?: number;
  /** How an upgrade in place runs the new code (src/daemon/upgrade.ts); default exec. */
  upgrade?: 'exec' | 'spawn';
  /** pid file path; false = off; undefined = the default (src/daemon/pid-file.ts). */
  pidFile?: string | false | undefined;
  /** Sites defined outside the config file, started on first request (docs/vhosts.md). */
  vhosts?: VhostsConfig | undefined;
  /** The web dashboard (src/dashboard/); undefined = off. */
  dashboard?: DashboardConfig | undefined;
  /** File label and key lines, so checks after loading (src/daemon/preflight.ts) name lines too. */
  origin?: ConfigOrigin;
}

/**
 * A URL path rewrite: the first regex rule that matches gives the script (and query);
 * a front controller takes every path that names no existing file.
 */
export type RewriteRule = { match: string; to: string } | { frontController: string };

/** Where site definitions come from, and how their pools live. */
export interface VhostsConfig {
  source: { kind: 'dir'; dir: string } | { kind: 'sqlite'; file: string; table: string } | { kind: 'postgres'; url: string; table: string };
  idleTimeout: number;
  pollInterval: number;
  defaultSite: string | undefined;
  /** Pool settings in file form, under each site's own. */
  defaults: Record<string, unknown>;
  /** site_max_children: a ceiling on each site's worker counts (0 = none). */
  siteMaxChildren: number;
}

/** What every site is read over: vhosts.defaults and the per-site cap. */
export type SiteBase = Pick<VhostsConfig, 'defaults' | 'siteMaxChildren'>;

/** One site: a file in vhosts.dir or a table row, validated (src/config/site.ts). */
export interface SiteConfig {
  /** File name without extension, or the row's id; also its pool's name. */
  id: string;
  /** Lower case; exact names and "*.suffix" wildcards. */
  names: string[];
  documentRoot: string;
  /**
   * Pool settings in file form (vhosts.defaults under the site's own; script_roots
   * default to [documentRoot]), validated; the PoolConfig is built when the site gets a
   * pool (src/config/site.ts sitePool), so an idle site keeps only this.
   */
  settings: Record<string, unknown>;
  /** Relative paths in `settings` are resolved against this. */
  baseDir: string;
  rewrite: RewriteRule[];
  /** Where it is defined, for messages: "sites/a.yaml" or "sites.db table sites row a". */
  origin: string;
}

export interface DashboardConfig {
  address: SocketAddress;
  allowedClients?: string[] | undefined;
  token?: string | undefined;
  /** name → "scrypt$N$r$p$salt$hash" (base64). */
  users?: Record<string, string> | undefined;
  /** Control socket paths or http(s):// dashboard URLs. */
  peers: string[];
  peerToken?: string | undefined;
  /** ms */
  history: number;
  /** ms */
  sampleInterval: number;
  /** ms between samples while no page is open (0: none). */
  idleSampleInterval: number;
}
