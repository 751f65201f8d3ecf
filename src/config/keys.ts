/**
 * Every configuration key, as data: its type, its default (spelt as in the file) and a
 * one-line description. schema.ts validates with these tables and docs/configuration.md's key
 * reference is generated from / checked against CONFIG_KEYS, so a key is described once.
 */
import { DASHBOARD_KEYS } from './dashboard-keys.js';
import { VHOSTS_KEYS } from './vhosts-keys.js';
import type { KeySpec, KeyType } from './key-spec.js';

const positiveDuration = { kind: 'duration', min: 1 } as const;
const anyDuration = { kind: 'duration', min: 0 } as const;

// Memory governor (docs/memory.md). Sizes of 0 mean off.
const memorySize = { kind: 'size', min: 0, max: 2 ** 40 } as const;
const sampleInterval = { kind: 'duration', min: 100 } as const;
const oomScore = { kind: 'int', min: -1000, max: 1000 } as const;

const MEMORY_POOL_KEYS: readonly KeySpec[] = [
  { key: 'max_memory', field: 'maxMemory', type: memorySize, default: 0, defaultText: '0 (off)', scope: 'spawned', doc: 'Recycle a worker whose memory (PSS, else RSS) is above this, once its current request ends.' },
  { key: 'max_memory_hard', field: 'maxMemoryHard', type: memorySize, default: 0, defaultText: '0 (off)', scope: 'spawned', doc: 'Kill a worker whose memory is above this at once; its request gets 503 MEMORY_HARD_LIMIT.' },
  { key: 'memory_limit', field: 'memoryLimit', type: memorySize, default: 0, defaultText: '0 (off)', scope: 'spawned', doc: "Most memory for all of this pool's workers together; at the limit it spawns no more (requests queue). Where fcgi-pm may create cgroups, also the kernel limit of the pool's own memory cgroup." },
  { key: 'expected_worker_memory', field: 'expectedWorkerMemory', type: { kind: 'size', min: 1024 * 1024, max: 2 ** 40 }, default: '32MiB', scope: 'spawned', doc: 'Memory a new worker is assumed to need until workers of this pool have been measured.' },
  { key: 'rlimit_as', field: 'rlimitAs', type: memorySize, default: 0, defaultText: '0 (off)', scope: 'spawned', doc: 'Address-space limit (RLIMIT_AS, via prlimit) set on workers; the kernel refuses allocations past it.' },
  { key: 'memory_sample_interval', field: 'memorySampleInterval', type: sampleInterval, defaultText: '(the top-level memory_sample_interval)', scope: 'spawned', doc: "How often this pool's workers are measured." },
  { key: 'oom_score_adj', field: 'oomScoreAdj', type: oomScore, default: 800, scope: 'spawned', doc: "Workers' /proc/PID/oom_score_adj, set right after spawn: the kernel's OOM killer takes a worker before fcgi-pm." },
  { key: 'cpu_weight', field: 'cpuWeight', type: { kind: 'int', min: 0, max: 10000 }, default: 100, scope: 'spawned', doc: "The pool's share of the CPU against other pools when the CPU is busy: its workers run in a CPU cgroup of their own (cgroup v2 cpu.weight; v1 cpu.shares, 100 = 1024), where fcgi-pm may create one (root, or a delegated subtree). Equal weights give each busy pool an equal share, however many workers it runs (0 = no CPU cgroup: the workers compete as plain processes)." },
  { key: 'busy_cpu_slice', field: 'busyCpuSlice', type: anyDuration, default: '10ms', scope: 'spawned', doc: "While requests wait for this pool's workers (one queued within the last second), the workers run with this CPU time slice, longer than the kernel's default (0.7 ms × (1 + log2 CPUs)): any other task that wakes (fcgi-pm, the web server, another pool's worker) takes the CPU from them at once instead of waiting up to a clock tick, and the pool's share of the CPU (cpu_weight) is unchanged. Linux 6.12 or later (EEVDF custom slices, clamped to 0.1–100 ms) and the native addon native/sched-slice.c; elsewhere nothing changes (0 = off)." },
];

const MEMORY_TOP_KEYS: readonly KeySpec[] = [
  { key: 'max_children_total', field: 'maxChildrenTotal', type: { kind: 'int', min: 0, max: 1_000_000 }, default: 0, defaultText: '0 (off)', doc: "Most workers alive at once across all pools (PHP-FPM's process.max), divided fairly: each pool with workers or waiting requests can always reach max_children_total ÷ those pools; one below its share with requests waiting takes a place from a pool above its share (an idle worker now, else one after its request), and when places come free the pool with fewest workers gets the next." },
  { key: 'daemon_short_slice', field: 'daemonShortSlice', type: { kind: 'bool' }, default: true, doc: "fcgi-pm's own thread of its event loop runs with the shortest CPU time slice the kernel allows (0.1 ms; its default is 0.7 ms × (1 + log2 CPUs)): when the daemon wakes (a request, a worker's answer) on a CPU another task holds, it takes the CPU at once instead of waiting for that task's slice to end or the next clock tick. Its share of the CPU (daemon_cpu_weight) is unchanged, and the workers it starts keep the kernel's default. Set at start; Linux 6.12 or later (EEVDF custom slices) and the native addon native/sched-slice.c, and fcgi-pm at a nice of 0 or more (its workers take its nice, which the reset would drop); elsewhere nothing changes." },
  { key: 'daemon_cpu_weight', field: 'daemonCpuWeight', type: { kind: 'int', min: 0, max: 10000 }, default: 300, doc: "fcgi-pm's own share of a busy CPU beside its pools' CPU cgroups, on cpu_weight's scale (100 = one pool): every request passes through the daemon, which uses only what it needs, so a higher weight keeps it from waiting behind busy workers. Under cgroup v2 the cpu.weight of its leaf fcgi-pm.daemon; under v1 the nice of its autogroup (set only when the daemon leads its own session, as a service does). Only where pools get CPU cgroups (0 = leave it)." },
  { key: 'memory_budget', field: 'memoryBudget', type: { kind: 'budget' }, defaultText: '(off)', doc: 'Memory shared by all pools and fcgi-pm itself: a size, a percentage ("50%") of the memory cgroup limit fcgi-pm runs under or else of MemTotal, or auto (75% of MemAvailable at start, or of the cgroup limit when smaller).' },
  { key: 'memory_sample_interval', field: 'memorySampleInterval', type: sampleInterval, default: '2s', doc: "How often workers' memory and CPU are measured (pools may override it)." },
  { key: 'oom_score_adj', field: 'oomScoreAdj', type: oomScore, default: -500, doc: "fcgi-pm's own oom_score_adj, set at start where it may lower it (root, CAP_SYS_RESOURCE); otherwise left as it is." },
];

// What a spawned worker process is given besides its command (src/pool/rlimit.ts, src/worker/spawn.ts)
// and php-cgi's own settings (src/pool/php-settings.ts).
const PROCESS_POOL_KEYS: readonly KeySpec[] = [
  { key: 'rlimit_files', field: 'rlimitFiles', type: { kind: 'int', min: 1, max: 1 << 30 }, defaultText: "(fcgi-pm's own)", scope: 'spawned', doc: "Open-files limit (RLIMIT_NOFILE, soft and hard) of workers, set by prlimit before the program starts (PHP-FPM's rlimit_files); at most fcgi-pm's own hard limit when the workers run as another user (LimitNOFILE= in the unit)." },
  { key: 'rlimit_core', field: 'rlimitCore', type: memorySize, defaultText: "(fcgi-pm's own)", scope: 'spawned', doc: "Largest core file a crashing worker may write (RLIMIT_CORE, bytes; 0 for none), set like rlimit_files (PHP-FPM's rlimit_core)." },
  { key: 'process_priority', field: 'processPriority', type: { kind: 'int', min: -19, max: 20 }, defaultText: "(fcgi-pm's own)", scope: 'spawned', doc: "Workers' nice value, -19 (first) to 20 (last), set right after spawn (PHP-FPM's process.priority); below fcgi-pm's own needs root." },
  { key: 'php_value', field: 'phpValue', type: { kind: 'string-map' }, defaultText: '(none)', scope: 'spawned', doc: "php-cgi: PHP settings for this pool's workers (php -d NAME=VALUE), which a script may change (PHP-FPM's php_value); e.g. { error_log: /var/log/php/site.log }." },
  { key: 'php_admin', field: 'phpAdmin', type: { kind: 'string-map' }, defaultText: '(none)', scope: 'spawned', doc: "php-cgi: PHP settings a script cannot change, neither by ini_set nor a .user.ini (PHP-FPM's php_admin_value/php_admin_flag). php-cgi can hold those PHP lets only the system (PHP_INI_SYSTEM) or a directory (PHP_INI_PERDIR: fcgi-pm then turns .user.ini files off for the pool) set, and open_basedir (ini_set may only narrow it); a setting any script may change (PHP_INI_ALL, e.g. memory_limit) is refused with the reason: use php_value, or for memory max_memory_hard. Checked against the pool's own php-cgi (docs/apps.md \"Locked PHP settings\")." },
];

// Which files a pool may run; checked on SCRIPT_FILENAME by every front end (src/frontend/script-guard.ts).
const SCRIPT_POOL_KEYS: readonly KeySpec[] = [
  { key: 'limit_extensions', field: 'limitExtensions', type: { kind: 'extensions' }, defaultText: '(.php .phar when command is php-cgi*, else off)', doc: 'The file SCRIPT_FILENAME would run (after php\'s cgi.fix_pathinfo walk) must be a regular file ending in one of these, else 403 ERR_SCRIPT_FORBIDDEN (404 ERR_SCRIPT_NOT_FOUND when there is none); off or [] turns the check off (PHP-FPM security.limit_extensions).' },
  { key: 'script_roots', field: 'scriptRoots', type: { kind: 'paths' }, defaultText: '(none)', doc: "Directories SCRIPT_FILENAME must lie in after resolving .. and symlinks, else 403 ERR_SCRIPT_FORBIDDEN; through an http listener it must also lie in its document_root." },
];

// Authorization in front of a pool (src/frontend/authorize.ts, docs/authorization.md "An authorizer in front of any pool").
const AUTHORIZER_POOL_KEYS: readonly KeySpec[] = [
  { key: 'authorizer', field: 'authorizer', type: { kind: 'string' }, defaultText: '(none)', doc: 'Ask this pool, as a FastCGI authorizer, about every request before it is dispatched to this pool, whatever the front end: 200 lets it through with the answer\'s Variable-NAME values as variables NAME, any other answer goes to the client; a failing authorizer denies with 503 ERR_AUTHORIZER_FAILED. The pool must exist, not be this one, and not have an authorizer of its own.' },
  { key: 'authorizer_cache', field: 'authorizerCache', type: anyDuration, default: '0s', defaultText: '0 (off)', doc: 'Keep a grant this long for later requests with the same authorizer_cache_key values (denies and failures are never kept); at most 4096 grants, the least recently used go first; emptied when either pool is replaced by a reload.' },
  { key: 'authorizer_cache_key', field: 'authorizerCacheKey', type: { kind: 'string-list' }, default: ['HTTP_AUTHORIZATION', 'HTTP_COOKIE', 'REQUEST_URI'], doc: 'Request variables whose values together pick a cached grant: name every variable the authorizer decides on. NAME/N takes only the first N path segments of the value (its query cut off): REQUEST_URI/1 makes /admin/a and /admin/b?x one key.' },
  { key: 'script', field: 'script', type: { kind: 'path' }, defaultText: '(none)', doc: 'Every request this pool gets runs this file: SCRIPT_FILENAME is set to it (SCRIPT_NAME and the rest are left as they came). For a PHP authorizer pool (authorizer requests carry no SCRIPT_FILENAME) or a single-entry application.' },
];

// Operations (docs/operations.md): status pages, the control socket, log files.
const OPERATIONS_LISTENER_KEYS: readonly KeySpec[] = [
  { key: 'name', field: 'name', type: { kind: 'string' }, doc: 'A name for this listener: with systemd socket activation, the FileDescriptorName= of the socket it takes over.' },
  { key: 'status_path', field: 'statusPath', type: { kind: 'url-path' }, doc: "Answer requests for this path (e.g. /status) with fcgi-pm's status page (PHP-FPM compatible; ?json, ?full, ?html, ?openmetrics), even when every worker is busy." },
  { key: 'ping_path', field: 'pingPath', type: { kind: 'url-path' }, doc: 'Answer requests for this path (e.g. /ping) with ping_response, without asking a worker.' },
  { key: 'ready_path', field: 'readyPath', type: { kind: 'url-path' }, doc: 'Answer requests for this path (e.g. /ready) with 200 while fcgi-pm serves and 503 once it is stopping (shutdown_delay keeps it serving meanwhile); ?pool=NAME also 503 while that pool is failing or its workers are all busy with its queue full. For load balancer health checks and Kubernetes readiness probes (docs/health.md).' },
  { key: 'ping_response', field: 'pingResponse', type: { kind: 'string' }, default: 'pong', doc: 'Body of the ping_path answer.' },
  { key: 'status_allow', field: 'statusAllow', type: { kind: 'allow-list' }, default: ['127.0.0.0/8', '::1', 'unix', 'local'], doc: 'Clients (REMOTE_ADDR) that may read status_path, ping_path and ready_path: CIDR blocks, addresses, unix (Unix-socket clients), local (no REMOTE_ADDR: a FastCGI client talking to fcgi-pm directly), all; others get 403.' },
];

const OPERATIONS_LOG_KEYS: readonly KeySpec[] = [
  { key: 'file', field: 'file', type: { kind: 'path' }, defaultText: '(stdout)', doc: 'Write the log to this file (appending); reopened on SIGUSR1 so logrotate can move it.' },
  { key: 'access_file', field: 'accessFile', type: { kind: 'path' }, defaultText: '(the main log)', doc: 'Write access-log lines to this file instead of the main log; reopened on SIGUSR1.' },
  { key: 'access_format', field: 'accessFormat', type: { kind: 'access-format' }, default: 'json', doc: 'json (one JSON object per request), fpm (PHP-FPM\'s common format) or a %-format such as "%R %t \\"%m %U\\" %s %{milli}d"; letters in docs/operations.md.' },
];

const OPERATIONS_TOP_KEYS: readonly KeySpec[] = [
  { key: 'control_socket', field: 'controlSocket', type: { kind: 'path-or-off' }, defaultText: '(runtime_dir/control.sock, else /run/fcgi-pm/<config name>-<hash>.sock as root)', doc: 'Unix socket for fcgi-pm status, reload, stop and workers; "off" disables it. The default is derived from the config file\'s real path, so two configs never share one.' },
  { key: 'control_socket_mode', field: 'controlSocketMode', type: { kind: 'mode' }, default: '0600', doc: 'File mode of the control socket: who may read status, reload and stop the daemon.' },
  { key: 'upgrade', field: 'upgrade', type: { kind: 'enum', values: ['exec', 'spawn'] }, default: 'exec', doc: 'How an upgrade in place (SIGUSR2, fcgi-pm upgrade) runs the new code. exec: in the same process, keeping its pid (for runit, s6, supervisord, a container\'s PID 1 and systemd alike), after checking that the new code starts and after the running requests finish, while new connections wait in the sockets\' queues; without the native addon it falls back to spawn, with a warning. spawn: a new daemon with a new pid takes the sockets while the old one finishes its requests (no pause; the supervisor must follow the new pid, as systemd does).' },
  { key: 'pid_file', field: 'pidFile', type: { kind: 'path-or-off' }, defaultText: '(as root: fcgi-pm.pid in the runtime directory\'s base; else none)', doc: 'File the daemon writes its pid to at start and removes on exit (unless a daemon that replaced it in an upgrade wrote its own); "off" for none.' },
];

export const LISTENER_KEYS: readonly KeySpec[] = [
  { key: 'protocol', field: 'protocol', type: { kind: 'enum', values: ['fastcgi', 'scgi', 'http'] }, required: true, doc: 'Protocol the front-end web server speaks to this listener.' },
  { key: 'address', field: 'address', type: { kind: 'address' }, required: true, doc: 'Where to listen: "127.0.0.1:9000", "[::1]:9000", ":9000" (all interfaces) or "unix:/path.sock".' },
  { key: 'pool', field: 'pool', type: { kind: 'string' }, defaultText: '(the only pool)', doc: 'Pool that serves this listener; may be left out when there is exactly one pool.' },
  { key: 'authorizer_pool', field: 'authorizerPool', type: { kind: 'string' }, defaultText: '(pool)', doc: 'FastCGI: pool that answers the FastCGI authorizer requests (role FCGI_AUTHORIZER: lighttpd "mode" => "authorizer", Apache mod_authnz_fcgi) arriving on this listener, its responder requests going to `pool`; on a vhosts listener it takes them all, whatever the site.' },
  { key: 'mode', field: 'mode', type: { kind: 'mode' }, defaultText: '"0600"', doc: 'Unix sockets only: file mode of the socket, octal and quoted, e.g. "0660".' },
  { key: 'owner', field: 'owner', type: { kind: 'user' }, defaultText: "(fcgi-pm's user)", doc: 'Unix sockets only: owner of the socket, a user name or uid (as FPM\'s listen.owner); giving it away takes root.' },
  { key: 'group', field: 'group', type: { kind: 'group' }, defaultText: "(fcgi-pm's group)", doc: 'Unix sockets only: group of the socket, a name or gid; with mode "0660" and group www-data, nginx running as www-data may connect.' },
  { key: 'allowed_clients', field: 'allowedClients', type: { kind: 'client-list' }, defaultText: '(any client)', doc: 'TCP only: client addresses and CIDR blocks (IPv4, IPv6) that may connect, as FPM\'s listen.allowed_clients; others are closed unread and logged (ERR_CLIENT_NOT_ALLOWED).' },
  { key: 'document_root', field: 'documentRoot', type: { kind: 'path' }, scope: 'http', doc: 'HTTP only: directory in which SCRIPT_FILENAME is resolved; files in it that the pool\'s limit_extensions does not allow are served as static files, paths with a dot segment (but /.well-known/) get 403.' },
  { key: 'index', field: 'index', type: { kind: 'string' }, default: 'index.php', doc: 'Script run for URLs ending in "/": on HTTP listeners, and on FastCGI and SCGI vhosts listeners (a SCRIPT_NAME ending in "/", as nginx\'s fastcgi_index).' },
  { key: 'body_buffer_size', field: 'bodyBufferSize', type: { kind: 'size', min: 0, max: 64 * 1024 * 1024 }, default: '64KiB', scope: 'http', doc: 'HTTP only: a chunked request body is read whole before the request is dispatched (the backend needs CONTENT_LENGTH); up to this many bytes stay in memory, the rest goes to a temp file in the private runtime directory.' },
  { key: 'max_body_size', field: 'maxBodySize', type: { kind: 'size', min: 1, max: 2 ** 40 }, default: '100MiB', scope: 'http', doc: 'HTTP only: a request body larger than this (declared by Content-Length, or counted as a chunked body arrives) is answered 413.' },
  { key: 'idle_timeout', field: 'idleTimeout', type: positiveDuration, default: '60s', doc: 'Close a front-end connection that sends nothing for this long.' },
  { key: 'header_timeout', field: 'headerTimeout', type: positiveDuration, default: '60s', doc: "A request's head (FastCGI BEGIN_REQUEST and PARAMS, the SCGI netstring, HTTP request line and headers) must arrive within this long of the connection's accept (as nginx's client_header_timeout; on a kept connection, of the next request's first byte); else the connection is closed (FastCGI, SCGI: ERR_CLIENT_HEADER_TIMEOUT; HTTP: after a 408)." },
  { key: 'body_timeout', field: 'bodyTimeout', type: positiveDuration, default: '60s', doc: 'A request body that stalls (no byte for this long) ends the request as a client timeout and frees its worker (FastCGI and SCGI: 408, ERR_CLIENT_BODY_TIMEOUT; HTTP: the connection is closed, ERR_HTTP_BODY_TIMEOUT).' },
  { key: 'max_conns', field: 'maxConns', type: { kind: 'int', min: 1, max: 1_000_000 }, default: 1024, doc: 'Most simultaneous front-end connections (announced as FCGI_MAX_CONNS); more are answered 503 (FastCGI: FCGI_OVERLOADED) and closed.' },
  { key: 'backlog', field: 'backlog', type: { kind: 'int', min: 1, max: 1_000_000 }, defaultText: '(net.core.somaxconn)', doc: 'Listen queue length: connections the kernel holds before fcgi-pm accepts them (capped by net.core.somaxconn).' },
  { key: 'params', field: 'params', type: { kind: 'string-map' }, default: {}, doc: 'CGI params added to (or overriding) every request from this listener; a name set here replaces every copy the client sent.' },
  { key: 'rewrite', field: 'rewrite', type: { kind: 'rewrite' }, defaultText: '(none)', doc: 'Rewrite rules applied to every request of this listener, after the site\'s own: { match: REGEX, to: "/script.php?query" } ($1..$9 are the captures; the request\'s query is kept after it) and { front_controller: /index.php } (a path naming no existing file runs that script, the path as PATH_INFO). limit_extensions and the roots apply to the result (docs/vhosts.md).' },
  { key: 'vhosts', field: 'vhosts', type: { kind: 'bool' }, default: false, doc: 'Route each request to the site of `vhosts` its host names (HTTP_HOST, i.e. the Host header, else SERVER_NAME); `pool` may then be left out.' },
  ...OPERATIONS_LISTENER_KEYS,
];

export const POOL_KEYS: readonly KeySpec[] = [
  { key: 'backend', field: 'backend', type: { kind: 'enum', values: ['fastcgi', 'scgi'] }, default: 'fastcgi', doc: 'Protocol the backends or spawned workers speak.' },
  { key: 'backends', field: 'backends', type: { kind: 'addresses' }, scope: 'external', doc: 'External backend addresses, tried in turn; a pool has either `backends` or `command`.' },
  { key: 'max_conns_per_backend', field: 'maxConnsPerBackend', type: { kind: 'int', min: 1, max: 100_000 }, default: 16, scope: 'external', doc: 'Most simultaneous requests sent to one external backend.' },
  { key: 'backend_down_time', field: 'backendDownTime', type: anyDuration, default: '5s', scope: 'external', doc: 'How long a backend that refused a connection is skipped.' },
  { key: 'connect_timeout', field: 'connectTimeout', type: positiveDuration, default: '5s', doc: 'Give up connecting to a backend or worker after this long (502).' },
  { key: 'read_timeout', field: 'readTimeout', type: positiveDuration, default: '60s', doc: 'No byte from the backend for this long while a request runs: 504.' },
  { key: 'keep_alive', field: 'keepAlive', type: { kind: 'bool' }, default: true, doc: 'FastCGI: keep backend connections open between requests (FCGI_KEEP_CONN).' },
  { key: 'authorizer_role', field: 'authorizerRole', type: { kind: 'enum', values: ['native', 'responder'] }, default: 'native', doc: 'FastCGI: how authorizer requests reach these backends. native: role FCGI_AUTHORIZER (libfcgi programs, php-cgi, fcgi-pm-wsgi); responder: a responder request with FCGI_ROLE=AUTHORIZER, for applications that know only that role. SCGI backends always get the latter.' },
  { key: 'command', field: 'command', type: { kind: 'argv' }, scope: 'spawned', doc: 'Spawn workers running this program: a list of arguments, no shell (e.g. [php-cgi]).' },
  { key: 'socket', field: 'socket', type: { kind: 'enum', values: ['fd0', 'argv'] }, default: 'fd0', scope: 'spawned', doc: 'How a worker gets its socket: fd0 (FastCGI standard, as stdin) or argv (the program binds "{socket}" or "{port}" given in its arguments).' },
  { key: 'env', field: 'env', type: { kind: 'string-map' }, default: {}, scope: 'spawned', doc: 'Environment variables set for workers (php-cgi gets PHP_FCGI_CHILDREN=0, or k with group_size k, and PHP_FCGI_MAX_REQUESTS=0 unless set).' },
  { key: 'inherit_env', field: 'inheritEnv', type: { kind: 'string-list' }, default: ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'], scope: 'spawned', doc: "Names of fcgi-pm's own environment variables passed on to workers; all others are cleared." },
  { key: 'cwd', field: 'cwd', type: { kind: 'path' }, scope: 'spawned', defaultText: "(fcgi-pm's)", doc: 'Working directory of workers.' },
  { key: 'user', field: 'user', type: { kind: 'string' }, scope: 'spawned', doc: 'Run workers as this user (name or uid; it must exist). As root, a spawned pool needs it: without, start is refused unless `user: root` or `run --allow-root`. Not as root it is ignored with a notice (unless it names fcgi-pm\'s own user).' },
  { key: 'group', field: 'group', type: { kind: 'string' }, scope: 'spawned', defaultText: "(the user's group)", doc: 'Run workers with this group (name or gid; it must exist). Ignored, like user, when fcgi-pm is not root.' },
  { key: 'accept', field: 'accept', type: { kind: 'enum', values: ['proxy', 'direct'] }, default: 'proxy', scope: 'spawned', doc: 'proxy: requests come through fcgi-pm\'s listeners, which hand each to a worker. direct: the workers accept on the pool\'s own socket (direct_listen) and fcgi-pm only spawns, samples and stops them; the pool\'s listeners are the overflow (nginx `backup` upstream). Needs the native addon (docs/direct.md).' },
  { key: 'direct_listen', field: 'directListen', type: { kind: 'address' }, scope: 'spawned', doc: 'accept: direct: the socket the workers share as fd 0 and the front end connects to, "unix:/run/fcgi-pm/site.sock" or "127.0.0.1:9001".' },
  { key: 'direct_backlog', field: 'directBacklog', type: { kind: 'int', min: 1, max: 65_535 }, defaultText: '511', scope: 'spawned', doc: 'accept: direct: listen() backlog of the shared socket (PHP-FPM\'s listen.backlog; the kernel caps it at net.core.somaxconn): connections wait there in arrival order. Past it a Unix connect() fails at once and nginx tries the backup (the overflow listener); TCP drops the SYN instead (docs/direct.md).' },
  { key: 'direct_socket_mode', field: 'directSocketMode', type: { kind: 'mode' }, default: '0660', scope: 'spawned', doc: 'accept: direct with a Unix socket: its file mode; the file belongs to the pool\'s user and group, so the front end must be in that group (or use "0666").' },
  { key: 'pm', field: 'pm', type: { kind: 'enum', values: ['static', 'dynamic', 'ondemand'] }, default: 'ondemand', scope: 'spawned', doc: 'Process manager: static (always max_children), dynamic (keep min..max spare idle), ondemand (spawn per need).' },
  { key: 'max_children', field: 'maxChildren', type: { kind: 'int', min: 1, max: 100_000 }, default: 5, scope: 'spawned', doc: 'Most workers alive at once; more requests wait in the queue.' },
  { key: 'preload', field: 'preload', type: { kind: 'bool' }, default: false, scope: 'spawned', doc: 'Python WSGI (bin/fcgi-pm-wsgi in command; fcgi-pm gives it --preload): one parent imports the application once and forks each worker (milliseconds instead of an exec and import; children share its pages copy-on-write). Workers are counted, capped and stopped one by one as usual; a reload starts a new parent and the old workers drain.' },
  { key: 'preload_idle_timeout', field: 'preloadIdleTimeout', type: anyDuration, default: '5m', scope: 'spawned', doc: 'preload: stop the parent after the pool has had no worker this long (0 = never); the next worker then costs one exec and import again.' },
  { key: 'group_size', field: 'groupSize', type: { kind: 'int', min: 1, max: 256 }, defaultText: '1; max_children with resident_parent', scope: 'spawned', doc: 'php-cgi groups: each worker is one php-cgi parent started with PHP_FCGI_CHILDREN=k (and PHP_FCGI_MAX_REQUESTS=0 unless env sets it) whose k children accept on one socket and share its opcache; a worker then takes k requests at once. max_children, start_children and the spares count php processes, rounded up to whole groups. With resident_parent the pool is one group unless set: every child is a fork of the warm parent.' },
  { key: 'resident_parent', field: 'residentParent', type: { kind: 'bool', auto: true }, default: false, scope: 'spawned', doc: 'php-cgi pools (accept: proxy): warm zero. The pool\'s workers are the children of one php-cgi parent (PHP_FCGI_CHILDREN: group_size, by default max_children), forked from it with PHP and its opcache shared memory loaded, so a worker that starts while others are busy is warm too. When the pool scales to zero the parent stays, paused (SIGSTOP), with one child paused beside it and the others ended; the next request wakes both (SIGCONT): the child accepts it and the parent forks the others again (milliseconds instead of an exec). The parent counts in the pool\'s memory (memory_limit, the budget), shows in status and workers, and is the first thing given back under memory pressure; then the next start is cold (exec, opcache file cache). auto: on for php-cgi pm ondemand pools while a memory_budget is set (the budget then decides whether the parent may stay). docs/memory.md "Warm zero and cold zero".' },
  { key: 'opcache_file_cache', field: 'opcacheFileCache', type: { kind: 'bool' }, default: true, scope: 'spawned', doc: 'php-cgi: keep compiled scripts in a file cache of this pool\'s own (opcache.file_cache, a 0700 directory owned by its user under opcache_dir), so a new worker starts warm instead of compiling the application again. Timestamps are still validated as the ini says. Off, or when the command sets opcache.file_cache or opcache.enable itself (-d), nothing is added.' },
  { key: 'start_children', field: 'startChildren', type: { kind: 'int', min: 0, max: 100_000 }, defaultText: '(static: max_children, dynamic: min_spare, ondemand: 0)', scope: 'spawned', doc: 'Workers spawned at start.' },
  { key: 'min_spare', field: 'minSpare', type: { kind: 'int', min: 0, max: 100_000 }, default: 1, scope: 'spawned', doc: 'pm dynamic: spawn workers when fewer than this are idle.' },
  { key: 'max_spare', field: 'maxSpare', type: { kind: 'int', min: 1, max: 100_000 }, default: 3, defaultText: '3 (at most max_children)', scope: 'spawned', doc: 'pm dynamic: stop idle workers beyond this many.' },
  { key: 'max_spawn_rate', field: 'maxSpawnRate', type: { kind: 'int', min: 1, max: 100_000 }, default: 32, scope: 'spawned', doc: 'Most workers spawned at once when scaling up.' },
  { key: 'spawn_timeout', field: 'spawnTimeout', type: positiveDuration, default: '10s', scope: 'spawned', doc: 'A worker not ready to accept after this long is killed and counted as a crash.' },
  { key: 'idle_timeout', field: 'idleTimeout', type: positiveDuration, default: '10s', scope: 'spawned', doc: 'pm ondemand/dynamic: stop a worker idle for this long.' },
  { key: 'max_requests', field: 'maxRequests', type: { kind: 'int', min: 0 }, default: 0, scope: 'spawned', doc: 'Recycle a worker after this many requests (0 = never).' },
  { key: 'max_requests_jitter', field: 'maxRequestsJitter', type: { kind: 'int', min: 0 }, default: 0, scope: 'spawned', doc: 'Random 0..N added to max_requests per worker so they do not all recycle at once.' },
  { key: 'max_lifetime', field: 'maxLifetime', type: anyDuration, default: '0s', scope: 'spawned', doc: 'Recycle a worker after it lived this long, once idle (0 = never).' },
  { key: 'request_timeout', field: 'requestTimeout', type: anyDuration, default: '0s', scope: 'spawned', doc: 'Kill a worker whose request runs longer than this; the client gets 504 (0 = never).' },
  { key: 'slow_request', field: 'slowRequest', type: anyDuration, default: '0s', scope: 'spawned', doc: 'Log a warning for requests running longer than this (0 = off).' },
  { key: 'kill_timeout', field: 'killTimeout', type: anyDuration, default: '5s', scope: 'spawned', doc: 'After SIGTERM, wait this long before SIGKILL. A php-cgi worker (through the proxy) that runs no request when it is stopped gets SIGKILL at once: PHP\'s shutdown after SIGTERM costs 15–25 ms of CPU a process (each child of a group too) and does nothing once no script runs (php-cgi has no `fastcgi_finish_request`); php-fpm\'s own fast stop ends its children the same way.' },
  { key: 'crash_limit', field: 'crashLimit', type: { kind: 'int', min: 0 }, default: 5, scope: 'spawned', doc: 'This many early crashes (a worker that exits before it is ready, or exits or dies on a crash signal within 5 s of its start before finishing a request) within crash_window stop spawning for a while; requests get 503 while no worker is free (0 = off). A worker killed from outside (SIGKILL or SIGTERM fcgi-pm did not send) is never counted and is replaced at once.' },
  { key: 'crash_window', field: 'crashWindow', type: positiveDuration, default: '60s', scope: 'spawned', doc: 'Time window over which crash_limit counts.' },
  { key: 'queue_limit', field: 'queueLimit', type: { kind: 'int', min: 0 }, default: 1024, doc: 'Requests waiting for a busy backend or worker; beyond this: 503. Requests that wait for a worker being started do not count (0 = none wait for busy ones).' },
  { key: 'queue_timeout', field: 'queueTimeout', type: positiveDuration, default: '5s', doc: 'A request waiting in the queue this long gets 503. In a spawned pool, one that would wait longer even at the fastest the pool drains gets its 503 at once, and one that a worker being started will take waits for it up to spawn_timeout (docs/overload.md).' },
  { key: 'queue_max_wait', field: 'queueMaxWait', type: anyDuration, default: '300ms', scope: 'spawned', doc: 'While the queue grows (requests arrive faster than the pool completes them, over several service times), a request is queued only while the requests ahead of it can be served within this time, at the slowest rate the pool finished requests in the last few sub-windows (at least 2 waiting requests per worker); otherwise it gets a 503 at once, so an overload is answered fast instead of with long waits. A queue that merely stands (clients that each wait for their answer, a burst) waits up to queue_timeout (0 = off: queue_limit alone).' },
  ...MEMORY_POOL_KEYS,
  ...PROCESS_POOL_KEYS,
  ...SCRIPT_POOL_KEYS,
  ...AUTHORIZER_POOL_KEYS,
];

export const LIMITS_KEYS: readonly KeySpec[] = [
  { key: 'max_params_bytes', field: 'maxParamsBytes', type: { kind: 'size', min: 1024, max: 16 * 1024 * 1024 }, default: '64KiB', doc: 'Most bytes of request variables (FastCGI PARAMS, SCGI header, HTTP head) a request may send.' },
  { key: 'max_params_count', field: 'maxParamsCount', type: { kind: 'int', min: 1, max: 1_000_000 }, default: 1000, doc: 'Most request variables a request may send.' },
];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** auto: human lines when the log goes to a terminal, JSON lines otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

export const LOG_KEYS: readonly KeySpec[] = [
  { key: 'level', field: 'level', type: { kind: 'enum', values: LOG_LEVELS }, default: 'info', doc: 'Least important log level written (--log-level overrides it).' },
  { key: 'format', field: 'format', type: { kind: 'enum', values: LOG_FORMATS }, default: 'auto', doc: 'json (one JSON object per line), pretty (time, level, message, then key=value pairs with code first; for people) or auto: pretty when the log goes to a terminal, json otherwise. --log-format overrides it; read at start.' },
  { key: 'access', field: 'access', type: { kind: 'bool' }, default: true, doc: 'Write one access-log line per finished request.' },
  ...OPERATIONS_LOG_KEYS,
];

/** Top-level scalar keys; the sections (listen, pools, limits, log) are handled by schema.ts. */
export const TOP_KEYS: readonly KeySpec[] = [
  { key: 'shutdown_timeout', field: 'shutdownTimeout', type: anyDuration, default: '30s', doc: 'On SIGTERM/SIGINT/SIGQUIT (and after an upgrade in place), how long running requests may finish before they are cut.' },
  { key: 'shutdown_delay', field: 'shutdownDelay', type: anyDuration, default: '0s', doc: 'On SIGTERM/SIGINT/SIGQUIT (or fcgi-pm stop), keep accepting and serving for this long while ready_path answers 503, so a load balancer or Kubernetes takes fcgi-pm out of rotation before its listeners close; set it above the health check interval × fall count. A further SIGINT skips it and stops at once.' },
  { key: 'runtime_dir', field: 'runtimeDir', type: { kind: 'path' }, defaultText: '(/run/fcgi-pm/<config name>-<hash> as root, else under $XDG_RUNTIME_DIR or the OS tmpdir)', doc: 'Directory under which fcgi-pm makes its private 0700 directory for worker sockets (fcgi-pm.<pid>.XXXXXX, removed on exit; those of dead daemons are removed at start).' },
  { key: 'opcache_dir', field: 'opcacheDir', type: { kind: 'path-or-off' }, defaultText: '(/var/cache/fcgi-pm/<config name>-<hash> as root, else the private runtime directory)', doc: 'Where php-cgi pools keep their opcache file caches (opcache_file_cache), one 0700 directory per pool owned by its user, never shared between users; "off" turns them all off. Not as root the default lasts as long as the daemon.' },
  ...MEMORY_TOP_KEYS,
  ...OPERATIONS_TOP_KEYS,
];

export const SECTION_KEYS = ['listen', 'pools', 'limits', 'log', 'vhosts', 'dashboard'] as const;

/** One row of the key reference. */
export interface KeyDoc {
  /** e.g. "listen[].address", "pools.<name>.max_children", "limits.max_params_bytes". */
  path: string;
  /** Human-readable type, e.g. "duration", "whole number ≥ 1", "fastcgi | scgi". */
  type: string;
  /** As written in the file, or a note in parentheses; "" when required or unset. */
  default: string;
  required: boolean;
  description: string;
}

export function describeType(t: KeyType): string {
  switch (t.kind) {
    case 'int':
      return t.max === undefined ? `whole number ≥ ${t.min}` : `whole number ${t.min}..${t.max}`;
    case 'duration':
      return 'duration';
    case 'size':
      return 'size';
    case 'bool':
      return t.auto === true ? 'true | false | auto' : 'true | false';
    case 'string':
      return 'string';
    case 'path':
      return 'path';
    case 'enum':
      return t.values.join(' | ');
    case 'address':
      return 'address';
    case 'addresses':
      return 'list of addresses';
    case 'argv':
      return 'list of strings';
    case 'string-map':
      return 'mapping of strings';
    case 'string-list':
      return 'list of strings';
    case 'mode':
      return 'octal mode';
    case 'budget':
      return 'size | percentage | auto';
    case 'url-path':
      return 'URL path';
    case 'allow-list':
      return 'list of CIDR blocks | unix | local | all';
    case 'client-list':
      return 'list of addresses and CIDR blocks';
    case 'user':
      return 'user name | uid';
    case 'group':
      return 'group name | gid';
    case 'access-format':
      return 'json | fpm | %-format';
    case 'path-or-off':
      return 'path | off';
    case 'extensions':
      return 'list of extensions | off';
    case 'paths':
      return 'list of paths';
    case 'mapping':
      return 'mapping';
    case 'rewrite':
      return 'list of rewrite rules';
  }
}

function defaultText(k: KeySpec): string {
  if (k.defaultText !== undefined) return k.defaultText;
  if (k.default === undefined) return '';
  if (Array.isArray(k.default)) return `[${k.default.join(', ')}]`;
  if (typeof k.default === 'object') return '{}';
  return String(k.default);
}

function rows(prefix: string, keys: readonly KeySpec[]): KeyDoc[] {
  return keys.map((k) => ({
    path: prefix + k.key,
    type: describeType(k.type),
    default: defaultText(k),
    required: k.required === true,
    description: k.doc,
  }));
}

/** The whole key reference, in the order docs/configuration.md lists it. */
export const CONFIG_KEYS: readonly KeyDoc[] = [
  { path: 'listen', type: 'list of listeners', default: '', required: true, description: 'Where front-end web servers connect; at least one.' },
  ...rows('listen[].', LISTENER_KEYS),
  { path: 'pools', type: 'mapping of name to pool', default: '', required: true, description: 'Named groups of backends or spawned workers; names may use letters, digits, "_", "-", ".".' },
  ...rows('pools.<name>.', POOL_KEYS),
  { path: 'limits', type: 'mapping', default: '', required: false, description: 'Limits on what a client may send.' },
  ...rows('limits.', LIMITS_KEYS),
  { path: 'log', type: 'mapping', default: '', required: false, description: 'Logging (JSON lines on stdout, or to log.file; human lines on a terminal).' },
  ...rows('log.', LOG_KEYS),
  { path: 'vhosts', type: 'mapping', default: '', required: false, description: 'Sites defined outside this file (a directory, an SQLite or a PostgreSQL table), each started on its first request (docs/vhosts.md).' },
  ...rows('vhosts.', VHOSTS_KEYS),
  ...rows('', TOP_KEYS),
  { path: 'dashboard', type: 'mapping', default: '', required: false, description: 'A web dashboard served by the daemon for it and its peers (docs/dashboard.md); off unless present.' },
  ...rows('dashboard.', DASHBOARD_KEYS),
];
