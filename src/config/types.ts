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

  // Operations (issue 5). Optional so configs built in code may leave them out;
  // schema.ts always sets pingResponse and statusAllow.
  /** Matched against systemd's LISTEN_FDNAMES for socket activation. */
  name?: string | undefined;
  /** Requests for this path get the status page from the daemon itself. */
  statusPath?: string | undefined;
  pingPath?: string | undefined;
  pingResponse?: string;
  /** Client rules for status/ping (src/config/cidr.ts); default loopback, unix, local. */
  statusAllow?: string[];
}

export type PmMode = 'static' | 'dynamic' | 'ondemand';

export interface PoolConfig {
  name: string;
  /** Protocol the backends speak. */
  backend: BackendProtocol;
  /** External backends (issue 2). Empty when `command` is set. */
  backends: SocketAddress[];
  maxConnsPerBackend: number; // default 16
  /** How long a refusing backend is skipped (default 5s). */
  backendDownTime: number;
  connectTimeout: number; // default 5s
  /** No byte from the backend for this long → 504 (default 60s). */
  readTimeout: number;
  keepAlive: boolean; // default true

  // Spawned workers (issue 3). `command` undefined → external backends only.
  command: string[] | undefined;
  socket: 'fd0' | 'argv';
  env: Record<string, string>;
  inheritEnv: string[];
  cwd: string | undefined;
  user: string | undefined;
  group: string | undefined;
  pm: PmMode; // default ondemand
  maxChildren: number; // default 5
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
  queueTimeout: number; // default 30s

  // Memory governor (issue 4). Optional so configs built in code may leave them out;
  // schema.ts always sets them. Sizes in bytes, 0 = off.
  maxMemory?: number;
  maxMemoryHard?: number;
  memoryLimit?: number;
  /** Assumed size of a new worker before any was measured (default 32 MiB). */
  expectedWorkerMemory?: number;
  rlimitAs?: number;
  /** undefined = the top-level memory_sample_interval. */
  memorySampleInterval?: number | undefined;

  // Which files may run (src/frontend/script-guard.ts). schema.ts fills the php-cgi default.
  /** Extensions SCRIPT_FILENAME must end in (".php"); empty or undefined = any file. */
  limitExtensions?: string[] | undefined;
  /** Directories SCRIPT_FILENAME must resolve into; empty or undefined = anywhere. */
  scriptRoots?: string[] | undefined;
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
    /** Log file instead of stdout (issue 5); reopened on SIGUSR1. */
    file?: string | undefined;
    /** Access lines to their own file instead of the main log. */
    accessFile?: string | undefined;
    /** 'json', 'fpm' or a %-format (src/config/access-format.ts). Default 'json'. */
    accessFormat?: string;
  };
  /** How long SIGTERM waits for in-flight requests (default 30s). */
  shutdownTimeout: number;
  /** Private directory for worker sockets (default: a fresh 0700 dir under the OS tmpdir). */
  runtimeDir: string | undefined;
  /** Host memory budget shared by all pools (undefined = none). */
  memoryBudget?: MemoryBudgetSetting | undefined;
  /** How often workers are measured (default 2s). */
  memorySampleInterval?: number;
  /** Control socket path; false = off; undefined = the default (src/config/control-path.ts). */
  controlSocket?: string | false | undefined;
  /** Default 0o600. */
  controlSocketMode?: number;
  /** File label and key lines, so checks after loading (src/daemon/preflight.ts) name lines too. */
  origin?: ConfigOrigin;
}
