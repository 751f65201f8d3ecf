/**
 * Every error fcgi-pm raises on purpose has a stable `code`. The table below is the
 * single list of them; docs/error-codes.md documents each one and a test
 * checks that none is missing there.
 *
 * This module is a leaf: every folder may import it, it imports nothing.
 */

export const ErrorCodes = {
  // Protocol faults from a peer (front-end client or backend): the connection is closed.
  FCGI_BAD_VERSION: 'ERR_FCGI_BAD_VERSION',
  FCGI_BAD_RECORD: 'ERR_FCGI_BAD_RECORD',
  FCGI_TRUNCATED: 'ERR_FCGI_TRUNCATED',
  FCGI_BAD_PARAMS: 'ERR_FCGI_BAD_PARAMS',
  PARAMS_TOO_LARGE: 'ERR_PARAMS_TOO_LARGE',
  PARAMS_TOO_MANY: 'ERR_PARAMS_TOO_MANY',
  SCGI_BAD_NETSTRING: 'ERR_SCGI_BAD_NETSTRING',
  SCGI_HEADER_TOO_LARGE: 'ERR_SCGI_HEADER_TOO_LARGE',
  SCGI_BAD_HEADERS: 'ERR_SCGI_BAD_HEADERS',
  CGI_BAD_RESPONSE_HEAD: 'ERR_CGI_BAD_RESPONSE_HEAD',
  CGI_RESPONSE_HEAD_TOO_LARGE: 'ERR_CGI_RESPONSE_HEAD_TOO_LARGE',
  // Failures a client sees as an HTTP status.
  BACKEND_UNREACHABLE: 'ERR_BACKEND_UNREACHABLE', // 502
  BACKEND_CLOSED: 'ERR_BACKEND_CLOSED', // 502: connection lost mid-request
  BACKEND_PROTOCOL: 'ERR_BACKEND_PROTOCOL', // 502: backend spoke garbage
  BACKEND_TIMEOUT: 'ERR_BACKEND_TIMEOUT', // 504
  ALL_BACKENDS_DOWN: 'ERR_ALL_BACKENDS_DOWN', // 502
  WORKER_CRASHED: 'ERR_WORKER_CRASHED', // 502
  WORKER_KILLED: 'ERR_WORKER_KILLED', // a worker killed from outside (SIGKILL/SIGTERM fcgi-pm did not send); its request 502
  REQUEST_TIMEOUT: 'ERR_REQUEST_TIMEOUT', // 504: worker killed after request_timeout
  QUEUE_FULL: 'ERR_QUEUE_FULL', // 503
  QUEUE_TIMEOUT: 'ERR_QUEUE_TIMEOUT', // 503
  POOL_FAILING: 'ERR_POOL_FAILING', // 503: crash limit reached
  MEMORY_HARD_LIMIT: 'ERR_MEMORY_HARD_LIMIT', // 503: worker over max_memory_hard
  WORKER_OOM_KILLED: 'ERR_WORKER_OOM_KILLED', // 503: the kernel's OOM killer killed the worker
  SHUTTING_DOWN: 'ERR_SHUTTING_DOWN', // 503
  NO_POOL: 'ERR_NO_POOL', // 500: listener names a pool that does not exist
  VHOST_UNKNOWN: 'ERR_VHOST_UNKNOWN', // 404: a vhosts listener got a host no site names (and no default_site)
  // Which files may run (limit_extensions, script_roots): refused before any worker sees them.
  SCRIPT_FORBIDDEN: 'ERR_SCRIPT_FORBIDDEN', // 403: extension not allowed, not a regular file, or outside the roots
  SCRIPT_NOT_FOUND: 'ERR_SCRIPT_NOT_FOUND', // 404: SCRIPT_FILENAME missing or naming nothing
  TOO_MANY_CONNECTIONS: 'ERR_TOO_MANY_CONNECTIONS', // 503 / FCGI_OVERLOADED: over max_conns or the open-files reserve
  // The FastCGI authorizer role (src/protocol/authorizer.ts).
  AUTHORIZER_ANSWER: 'ERR_AUTHORIZER_ANSWER', // 502: an authorizer's answer is unusable (a bad Variable- header)
  AUTHORIZER_ROLE: 'ERR_AUTHORIZER_ROLE', // 502: the worker refused the authorizer role (FCGI_UNKNOWN_ROLE)
  AUTHORIZER_BODY: 'ERR_AUTHORIZER_BODY', // 400: a front end sent an authorizer request with a body
  AUTHORIZER_FAILED: 'ERR_AUTHORIZER_FAILED', // 503: the authorizer in front of a pool failed or timed out: denied
  // FastCGI and SCGI clients too slow with their request (the connection or request is ended).
  CLIENT_HEADER_TIMEOUT: 'ERR_CLIENT_HEADER_TIMEOUT',
  CLIENT_BODY_TIMEOUT: 'ERR_CLIENT_BODY_TIMEOUT', // 408
  // HTTP listener rejections before or around a request (logged; 400 for a bad path).
  HTTP_BAD_PATH: 'ERR_HTTP_BAD_PATH',
  HTTP_HEAD_TIMEOUT: 'ERR_HTTP_HEAD_TIMEOUT',
  HTTP_BODY_TIMEOUT: 'ERR_HTTP_BODY_TIMEOUT',
  HTTP_SEND_TIMEOUT: 'ERR_HTTP_SEND_TIMEOUT',
  // A TCP connection from an address not in the listener's allowed_clients: closed unread.
  CLIENT_NOT_ALLOWED: 'ERR_CLIENT_NOT_ALLOWED',
  HTTP_BODY_TOO_LARGE: 'ERR_HTTP_BODY_TOO_LARGE', // 413: over the listener's max_body_size
  HTTP_BODY_BUFFER: 'ERR_HTTP_BODY_BUFFER', // 500: the body's temp file could not be written
  HTTP_BAD_HEAD: 'ERR_HTTP_BAD_HEAD', // 400: a head node:http accepts but HTTP forbids (two Host headers)
  HTTP_VERSION: 'ERR_HTTP_VERSION', // 505: an HTTP version other than 1.0 and 1.1
  HTTP_FORBIDDEN: 'ERR_HTTP_FORBIDDEN', // 403: dotfile path, or a static file reached through a symlink out of document_root
  HTTP_METHOD_NOT_ALLOWED: 'ERR_HTTP_METHOD_NOT_ALLOWED', // 405: a static file asked with a method other than GET or HEAD
  HTTP_STATIC_READ: 'ERR_HTTP_STATIC_READ', // 404 / 500: a static file vanished or could not be read
  // Configuration and start-up.
  CONFIG_INVALID: 'ERR_CONFIG_INVALID',
  // A valid config this host cannot run as it stands (src/daemon/preflight.ts).
  HOST_CHECK: 'ERR_HOST_CHECK',
  ROOT_WORKERS: 'ERR_ROOT_WORKERS',
  LISTEN_FAILED: 'ERR_LISTEN_FAILED',
  ALREADY_RUNNING: 'ERR_ALREADY_RUNNING',
  SPAWN_FAILED: 'ERR_SPAWN_FAILED',
  DIRECT_SOCKET: 'ERR_DIRECT_SOCKET', // accept: direct: the shared socket could not be opened or watched (no native addon): the pool serves through its proxy listener
  PRELOAD_PARENT_EXITED: 'ERR_PRELOAD_PARENT_EXITED',
  PRELOAD_PARENT_EVICTED: 'ERR_PRELOAD_PARENT_EVICTED',
  START_FAILED: 'ERR_START_FAILED',
  VHOST_INVALID: 'ERR_VHOST_INVALID', // a site file or row that does not validate: skipped, the others serve
  VHOST_SOURCE: 'ERR_VHOST_SOURCE', // the sites directory or database could not be read: the sites known keep serving
  OPCACHE_DIR: 'ERR_OPCACHE_DIR', // a php-cgi pool's opcache file cache directory could not be made: its workers run without it
  OPEN_FILES_LIMIT: 'ERR_OPEN_FILES_LIMIT', // the open-files limit could not be raised (prlimit missing or refused)
  // Warnings in the log: every warn/error line carries a code (src/log/log.ts enforces it).
  SPAWN_TIMEOUT: 'ERR_SPAWN_TIMEOUT',
  KILL_TIMEOUT: 'ERR_KILL_TIMEOUT',
  REQUEST_LOST: 'ERR_REQUEST_LOST',
  WORKER_STDERR: 'ERR_WORKER_STDERR',
  BACKEND_STDERR: 'ERR_BACKEND_STDERR',
  LOG_RATE_LIMITED: 'ERR_LOG_RATE_LIMITED',
  SLOW_REQUEST: 'ERR_SLOW_REQUEST',
  MAX_CHILDREN: 'ERR_MAX_CHILDREN',
  MAX_CONNS: 'ERR_MAX_CONNS',
  MAX_MEMORY_TOO_LOW: 'ERR_MAX_MEMORY_TOO_LOW',
  MEMORY_BUDGET: 'ERR_MEMORY_BUDGET',
  MEMORY_BUDGET_UNFIT: 'ERR_MEMORY_BUDGET_UNFIT',
  MEMORY_BOX_FULL: 'ERR_MEMORY_BOX_FULL',
  MEMORY_CGROUP: 'ERR_MEMORY_CGROUP',
  CPU_CGROUP: 'ERR_CPU_CGROUP',
  FCGI_UNKNOWN_ROLE: 'ERR_FCGI_UNKNOWN_ROLE',
  FCGI_OVERLOADED: 'ERR_FCGI_OVERLOADED',
  CLIENT_SEND_TIMEOUT: 'ERR_CLIENT_SEND_TIMEOUT',
  HTTP_BAD_REQUEST: 'ERR_HTTP_BAD_REQUEST',
  ACCEPT_FAILED: 'ERR_ACCEPT_FAILED',
  SHUTDOWN_FORCED: 'ERR_SHUTDOWN_FORCED',
  STOP_FAILED: 'ERR_STOP_FAILED',
  RELOAD_FAILED: 'ERR_RELOAD_FAILED',
  RELOAD_INCOMPLETE: 'ERR_RELOAD_INCOMPLETE',
  RESTART_ABORTED: 'ERR_RESTART_ABORTED',
  CONTROL_SOCKET: 'ERR_CONTROL_SOCKET',
  DASHBOARD: 'ERR_DASHBOARD',
  DASHBOARD_AUTH: 'ERR_DASHBOARD_AUTH',
  SOCKET_UNMATCHED: 'ERR_SOCKET_UNMATCHED',
  SYSTEMD_NOTIFY: 'ERR_SYSTEMD_NOTIFY',
  UPGRADE_FAILED: 'ERR_UPGRADE_FAILED', // an upgrade in place whose new daemon did not start: the old one keeps serving
  UPGRADE_NO_EXEC: 'ERR_UPGRADE_NO_EXEC', // upgrade: exec impossible here (no native addon): the new code starts with a new pid
  PID_FILE: 'ERR_PID_FILE', // the pid file could not be written or removed
  INTERNAL: 'ERR_INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

const KNOWN: ReadonlySet<string> = new Set(Object.values(ErrorCodes));

/** `err`'s own stable code when it carries one of ours (a ProxyError, say), else `fallback`. */
export function codeOf(err: unknown, fallback: ErrorCode): ErrorCode {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && KNOWN.has(code) ? (code as ErrorCode) : fallback;
}

/** A peer sent bytes that break the FastCGI, SCGI or CGI-response rules. */
export class ProtocolError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'ProtocolError';
    this.code = code;
  }
}

/** A request could not be served; `status` is what the client is answered with. */
export class ProxyError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds for a Retry-After header (503 only). */
  readonly retryAfter: number | undefined;
  constructor(code: ErrorCode, status: number, message: string, retryAfter?: number) {
    super(message);
    this.name = 'ProxyError';
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

/**
 * A ProxyError without a stack: for refusals that are routine under load (503 queue
 * full, queue timeout), where capturing a stack per request is the expensive part and
 * says nothing (the code and message do).
 */
export function refusalError(code: ErrorCode, status: number, message: string, retryAfter?: number): ProxyError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ProxyError(code, status, message, retryAfter);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

export class ConfigError extends Error {
  readonly code: ErrorCode;
  /** One line per problem: "file:line: key: message". */
  readonly problems: string[];
  constructor(problems: string[], code: ErrorCode = ErrorCodes.CONFIG_INVALID) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
    this.code = code;
  }
}
