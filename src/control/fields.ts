/**
 * Every figure of the status snapshot, defined once: its text title, its PHP-FPM status
 * page name, its Prometheus metric (name, type, help) and how to read it. The renderers
 * (text, Prometheus, PHP-FPM text/JSON/HTML) only walk these tables, so a figure added
 * here appears in every format, and no format spells the list out again (PHP-FPM's weak
 * spot: its fpm_status.c writes the field list once per format).
 */
import type { Histogram, ListenerStatus, PoolStatus, StatusSnapshot, WorkerStatus } from './types.js';
import { ErrorCodes } from '../errors.js';

export type MetricType = 'counter' | 'gauge' | 'summary' | 'histogram';

/** A value, or labelled values (one Prometheus series / one text row each). */
export type FieldValue = number | string | undefined;

export interface Field<T> {
  /** Stable id; also the text renderer's row key. */
  id: string;
  /** Text renderer label. */
  title: string;
  /** Name on the PHP-FPM status page (pool page or per-process block). */
  fpm?: string;
  /** Part of PHP-FPM's own list (exporters expect it); others are our additions. */
  fpmStandard?: boolean;
  /** Prometheus metric; undefined = not exported (e.g. derivable from others). */
  metric?: string;
  type: MetricType;
  help: string;
  /** Unit hint for text: 'ms', 'bytes', 'epoch', 'percent'. */
  unit?: 'ms' | 'bytes' | 'epoch' | 'seconds' | 'percent' | 'ratio';
  value?: (x: T, now: number) => FieldValue;
  /** Several series under one metric, e.g. rejected{cause}. */
  labelled?: { label: string; values: (x: T) => Array<[string, number]>; /** Label values are codes, shown as they are. */ verbatim?: boolean };
  /** Summaries: sum and count (and max, shown in text and as <metric>_max gauge-less extra). */
  summary?: (x: T) => { count: number; totalMs: number; maxMs: number } | undefined;
  /** Histograms (ms buckets; exported as seconds with le labels); a field may give a summary for text too. */
  histogram?: (x: T) => Histogram | undefined;
}

const snake = (s: string): string => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Label values as words for text pages: "queue_full" → "queue full" (codes as they are). */
export function spacedName(s: string, f?: Field<never>): string {
  if (f?.labelled?.verbatim === true) return s;
  return s.replace(/_/g, ' ').replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`);
}

function entries(o: Record<string, number>): Array<[string, number]> {
  return Object.entries(o).map(([k, v]) => [snake(k), v]);
}

const WORKER_STATES = ['spawning', 'idle', 'busy', 'draining', 'stopping'] as const;

/** Error codes in a stable order. */
function codes(o: Record<string, number> | undefined): Array<[string, number]> {
  return o === undefined ? [] : Object.entries(o).sort(([a], [b]) => a.localeCompare(b));
}

/** Busy seats ÷ seats (undefined for external pools, whose backends' capacity is not known). */
export function utilization(p: PoolStatus): number | undefined {
  if (p.capacity === undefined || p.capacity <= 0) return undefined;
  return Math.round((p.active / p.capacity) * 1000) / 1000;
}

/** Per pool. The first fourteen are PHP-FPM's pool page, in its order. */
export const POOL_FIELDS: ReadonlyArray<Field<PoolStatus>> = [
  { id: 'pool', title: 'pool', fpm: 'pool', fpmStandard: true, type: 'gauge', help: 'Pool name.', value: (p) => p.name },
  { id: 'pm', title: 'process manager', fpm: 'process manager', fpmStandard: true, type: 'gauge', help: 'static, dynamic, ondemand or external.', value: (p) => p.pm },
  { id: 'startTime', title: 'start time', fpm: 'start time', fpmStandard: true, metric: 'fcgipm_pool_start_time_seconds', type: 'gauge', unit: 'epoch', help: 'When the pool was started (or last replaced by a reload), Unix time.', value: (p) => p.startedAt / 1000 },
  { id: 'startSince', title: 'start since', fpm: 'start since', fpmStandard: true, type: 'gauge', unit: 'seconds', help: 'Seconds since the pool was started.', value: (p, now) => Math.max(0, Math.floor((now - p.startedAt) / 1000)) },
  { id: 'accepted', title: 'accepted conn', fpm: 'accepted conn', fpmStandard: true, metric: 'fcgipm_requests_accepted_total', type: 'counter', help: 'Requests the pool accepted (served, queued or refused).', value: (p) => p.accepted },
  { id: 'queueLength', title: 'listen queue', fpm: 'listen queue', fpmStandard: true, metric: 'fcgipm_queue_requests', type: 'gauge', help: 'Requests waiting for a free worker or backend.', value: (p) => p.queue.length },
  { id: 'queueMax', title: 'max listen queue', fpm: 'max listen queue', fpmStandard: true, metric: 'fcgipm_queue_requests_max', type: 'gauge', help: 'Most requests that waited at once since the pool started.', value: (p) => p.queue.max },
  { id: 'queueLimit', title: 'listen queue len', fpm: 'listen queue len', fpmStandard: true, metric: 'fcgipm_queue_limit', type: 'gauge', help: 'queue_limit: waiting requests beyond it get 503.', value: (p) => p.queue.limit },
  { id: 'idle', title: 'idle processes', fpm: 'idle processes', fpmStandard: true, type: 'gauge', help: 'Idle workers.', value: (p) => p.processes.idle },
  { id: 'active', title: 'active processes', fpm: 'active processes', fpmStandard: true, metric: 'fcgipm_requests_active', type: 'gauge', help: 'Requests running now (one per busy worker in spawned pools).', value: (p) => p.active },
  { id: 'total', title: 'total processes', fpm: 'total processes', fpmStandard: true, type: 'gauge', help: 'Live workers.', value: (p) => p.processes.total },
  { id: 'maxActive', title: 'max active processes', fpm: 'max active processes', fpmStandard: true, metric: 'fcgipm_requests_active_max', type: 'gauge', help: 'Most requests running at once since the pool started.', value: (p) => p.maxActive },
  { id: 'maxChildrenReached', title: 'max children reached', fpm: 'max children reached', fpmStandard: true, metric: 'fcgipm_max_children_reached_total', type: 'counter', help: 'Times the pool reached max_children with requests waiting.', value: (p) => p.maxChildrenReached },
  { id: 'slowRequests', title: 'slow requests', fpm: 'slow requests', fpmStandard: true, metric: 'fcgipm_slow_requests_total', type: 'counter', help: 'Requests that ran longer than slow_request.', value: (p) => p.slowRequests },
  // Ours.
  { id: 'state', title: 'state', fpm: 'state', type: 'gauge', help: 'running, failing (crash limit reached), stopping or stopped.', value: (p) => p.state },
  { id: 'failing', title: 'failing', metric: 'fcgipm_pool_failing', type: 'gauge', help: '1 while the pool answers 503 because its workers keep crashing.', value: (p) => (p.state === 'failing' ? 1 : 0) },
  { id: 'maxChildren', title: 'max children', fpm: 'max children', metric: 'fcgipm_max_children', type: 'gauge', help: 'max_children of the pool.', value: (p) => p.maxChildren },
  { id: 'utilization', title: 'utilization', fpm: 'utilization', metric: 'fcgipm_pool_utilization_ratio', type: 'gauge', unit: 'ratio', help: 'Spawned pools: requests running ÷ requests the pool can run at once (max_children × group_size); what an autoscaler (HPA, KEDA) scales on.', value: (p) => utilization(p) },
  { id: 'workers', title: 'workers', metric: 'fcgipm_workers', type: 'gauge', help: 'Live workers by state.', labelled: { label: 'state', values: (p) => WORKER_STATES.map((s) => [s, p.processes[s]]) } },
  { id: 'completed', title: 'completed requests', fpm: 'completed requests', metric: 'fcgipm_requests_completed_total', type: 'counter', help: 'Requests answered by a backend or worker.', value: (p) => p.completed },
  { id: 'aborted', title: 'aborted requests', fpm: 'aborted requests', metric: 'fcgipm_requests_aborted_total', type: 'counter', help: 'Requests whose client went away before their response was complete.', value: (p) => p.aborted },
  { id: 'rejected', title: 'rejected (503)', fpm: 'rejected', metric: 'fcgipm_requests_rejected_total', type: 'counter', help: 'Requests answered 503 without running, by cause.', labelled: { label: 'cause', values: (p) => entries(p.rejected) } },
  { id: 'refusals', title: 'refused or failed', fpm: 'refused', metric: 'fcgipm_refusals_total', type: 'counter', help: 'Requests fcgi-pm answered itself instead of the application, by error code (script guard 403/404, authorizer failure, queue full, backend failures...).', labelled: { label: 'code', values: (p) => codes(p.outcomes?.refusals), verbatim: true } },
  { id: 'latency', title: 'latency', metric: 'fcgipm_request_duration_seconds', type: 'histogram', unit: 'ms', help: 'Time from a request\'s arrival to the end of its answer.', histogram: (p) => p.outcomes?.latency },
  { id: 'responses', title: 'responses', metric: 'fcgipm_responses_total', type: 'counter', help: 'Finished responses by status class (1xx to 5xx).', labelled: { label: 'class', values: (p) => (p.outcomes === undefined ? [] : Object.entries(p.outcomes.status)) } },
  { id: 'authorizer', title: 'authorizer decisions', fpm: 'authorizer decisions', metric: 'fcgipm_authorizer_decisions_total', type: 'counter', help: "A pool with an authorizer: finished requests by the authorizer's decision (allowed, cached: a kept grant, denied, failed: 503).", labelled: { label: 'decision', values: (p) => (p.outcomes?.authorizer === undefined ? [] : entries({ ...p.outcomes.authorizer })) } },
  { id: 'authorizer_answers', title: 'authorizer answers', fpm: 'authorizer answers', metric: 'fcgipm_authorizer_answers_total', type: 'counter', help: 'A pool a front end sent authorizer requests to (lighttpd, Apache): its answers (allowed: 200, denied: another status, failed: an error fcgi-pm answered instead).', labelled: { label: 'answer', values: (p) => (p.outcomes?.authorizerAnswers === undefined ? [] : entries({ ...p.outcomes.authorizerAnswers })) } },
  { id: 'errors', title: 'errors', fpm: 'errors', metric: 'fcgipm_request_errors_total', type: 'counter', help: 'Requests answered 502/504 by kind: unreachable, timeout, crashed, other.', labelled: { label: 'kind', values: (p) => entries(p.errors) } },
  { id: 'crashes', title: 'worker crashes', fpm: 'worker crashes', metric: 'fcgipm_worker_crashes_total', type: 'counter', help: 'Workers that exited without being asked to.', value: (p) => p.crashes },
  { id: 'recycles', title: 'worker recycles', fpm: 'recycled', metric: 'fcgipm_worker_recycles_total', type: 'counter', help: 'Workers retired by the manager, by reason.', labelled: { label: 'reason', values: (p) => Object.entries(p.recycles).sort(([a], [b]) => a.localeCompare(b)) } },
  { id: 'queueOldest', title: 'oldest queued', fpm: 'oldest queued ms', metric: 'fcgipm_queue_oldest_wait_seconds', type: 'gauge', unit: 'ms', help: 'How long the oldest waiting request has waited.', value: (p) => p.queue.oldestWaitMs },
  { id: 'queueWait', title: 'queue wait', fpm: 'queue wait', metric: 'fcgipm_queue_wait_seconds', type: 'histogram', unit: 'ms', help: 'Time requests waited in the queue before a worker or backend took them (0 for those that found one free).', summary: (p) => p.queue.waits, histogram: (p) => p.outcomes?.queueWait },
  { id: 'spawn', title: 'spawn latency', fpm: 'spawn', metric: 'fcgipm_worker_spawn_seconds', type: 'summary', unit: 'ms', help: 'Time from spawning a worker to its socket accepting.', summary: (p) => p.spawns },
  { id: 'memoryTotal', title: 'memory', fpm: 'memory', metric: 'fcgipm_pool_memory_bytes', type: 'gauge', unit: 'bytes', help: "Measured memory of the pool's workers (PSS where known, else RSS).", value: (p) => p.memory?.total },
  { id: 'memoryCommitted', title: 'memory committed', fpm: 'memory committed', metric: 'fcgipm_pool_memory_committed_bytes', type: 'gauge', unit: 'bytes', help: 'Memory the governor counts for the pool (each worker at least the estimate).', value: (p) => p.memory?.committed },
  { id: 'memoryLimit', title: 'memory limit', fpm: 'memory limit', metric: 'fcgipm_pool_memory_limit_bytes', type: 'gauge', unit: 'bytes', help: 'memory_limit of the pool.', value: (p) => p.memory?.limit },
  { id: 'memoryEstimate', title: 'worker memory estimate', fpm: 'worker memory estimate', metric: 'fcgipm_pool_worker_memory_estimate_bytes', type: 'gauge', unit: 'bytes', help: 'Expected size of a new worker.', value: (p) => p.memory?.estimate },
  { id: 'recommendedMaxChildren', title: 'recommended max children', fpm: 'recommended max children', metric: 'fcgipm_pool_recommended_max_children', type: 'gauge', help: 'max_children that fits the memory limit or budget at the measured worker size.', value: (p) => p.memory?.recommendedMaxChildren },
  { id: 'memoryRefused', title: 'spawns refused for memory', fpm: 'spawns refused for memory', metric: 'fcgipm_memory_refused_spawns_total', type: 'counter', help: 'Worker spawns refused by memory_limit or memory_budget.', value: (p) => p.memory?.refusedSpawns },
  { id: 'memoryKilled', title: 'workers killed for memory', fpm: 'workers killed for memory', metric: 'fcgipm_memory_hard_kills_total', type: 'counter', help: 'Workers killed at once for going over max_memory_hard.', value: (p) => p.memory?.killed },
  { id: 'cpuWeight', title: 'cpu weight', fpm: 'cpu weight', metric: 'fcgipm_pool_cpu_weight', type: 'gauge', help: "cpu_weight of the pool's CPU cgroup: its share of a busy CPU against other pools (absent when it has none).", value: (p) => p.cpu?.weight },
  { id: 'memoryEvicted', title: 'workers evicted for the budget', fpm: 'workers evicted for memory budget', metric: 'fcgipm_memory_evictions_total', type: 'counter', help: "Workers stopped to make room in the host memory budget.", value: (p) => p.memory?.evicted },
  { id: 'backendActive', title: 'backend requests', metric: 'fcgipm_backend_requests_active', type: 'gauge', help: 'Requests running on each external backend.', labelled: { label: 'backend', values: (p) => p.backends.map((b) => [b.address, b.active]) } },
  { id: 'backendUp', title: 'backend up', metric: 'fcgipm_backend_up', type: 'gauge', help: '0 while an external backend is marked down.', labelled: { label: 'backend', values: (p) => p.backends.map((b) => [b.address, b.down ? 0 : 1]) } },
];

/** Per worker: PHP-FPM's ?full per-process block, in its order, then ours. */
export const WORKER_FIELDS: ReadonlyArray<Field<WorkerStatus>> = [
  { id: 'pid', title: 'pid', fpm: 'pid', fpmStandard: true, type: 'gauge', help: 'Process id.', value: (w) => w.pid },
  { id: 'state', title: 'state', fpm: 'state', fpmStandard: true, type: 'gauge', help: 'Idle, Running, Starting or Ending (PHP-FPM names).', value: (w) => fpmState(w) },
  { id: 'startTime', title: 'start time', fpm: 'start time', fpmStandard: true, type: 'gauge', unit: 'epoch', help: 'When the worker was spawned.', value: (w) => w.startedAt / 1000 },
  { id: 'startSince', title: 'start since', fpm: 'start since', fpmStandard: true, type: 'gauge', unit: 'seconds', help: 'Seconds since it was spawned.', value: (w, now) => Math.max(0, Math.floor((now - w.startedAt) / 1000)) },
  { id: 'requests', title: 'requests', fpm: 'requests', fpmStandard: true, type: 'counter', help: 'Requests it was given.', value: (w) => w.requests },
  { id: 'requestDuration', title: 'request duration', fpm: 'request duration', fpmStandard: true, type: 'gauge', help: 'Microseconds: of the running request so far, else of the last one.', value: (w) => Math.round(((w.request ?? w.last)?.durationMs ?? 0) * 1000) },
  { id: 'requestMethod', title: 'request method', fpm: 'request method', fpmStandard: true, type: 'gauge', help: 'Method of the running (else last) request.', value: (w) => (w.request ?? w.last)?.method || '-' },
  { id: 'requestUri', title: 'request URI', fpm: 'request URI', fpmStandard: true, type: 'gauge', help: 'URI of the running (else last) request.', value: (w) => (w.request ?? w.last)?.uri || '-' },
  { id: 'contentLength', title: 'content length', fpm: 'content length', fpmStandard: true, type: 'gauge', help: 'Request body length of the running (else last) request.', value: (w) => (w.request ?? w.last)?.contentLength ?? 0 },
  { id: 'user', title: 'user', fpm: 'user', fpmStandard: true, type: 'gauge', help: 'REMOTE_USER of the running (else last) request.', value: (w) => (w.request ?? w.last)?.user || '-' },
  { id: 'script', title: 'script', fpm: 'script', fpmStandard: true, type: 'gauge', help: 'SCRIPT_FILENAME of the running (else last) request.', value: (w) => (w.request ?? w.last)?.script || '-' },
  { id: 'cpu', title: 'last request cpu', fpm: 'last request cpu', fpmStandard: true, type: 'gauge', unit: 'percent', help: "The worker's CPU use at its latest sample, percent of one CPU.", value: (w) => w.cpu ?? 0 },
  { id: 'memory', title: 'last request memory', fpm: 'last request memory', fpmStandard: true, metric: 'fcgipm_worker_memory_bytes', type: 'gauge', unit: 'bytes', help: "The worker's memory at its latest sample (PSS where known, else RSS).", value: (w) => w.memory },
  // Ours.
  { id: 'memoryPeak', title: 'memory peak', fpm: 'memory peak', type: 'gauge', unit: 'bytes', help: 'Largest memory sample of the worker.', value: (w) => w.memoryPeak },
  { id: 'retiring', title: 'retiring', fpm: 'retiring', type: 'gauge', help: 'Why the worker is on its way out, if it is.', value: (w) => w.retiring },
  { id: 'slots', title: 'slots', fpm: 'slots', type: 'gauge', help: 'group_size > 1: requests the group takes at once (its php-cgi children).', value: (w) => w.slots },
  { id: 'busySlots', title: 'busy slots', fpm: 'busy slots', type: 'gauge', help: 'group_size > 1: requests the group runs now.', value: (w) => w.busySlots },
];

/** PHP-FPM's process state names, which exporters count. */
export function fpmState(w: WorkerStatus): string {
  switch (w.state) {
    case 'idle':
      return 'Idle';
    case 'busy':
    case 'draining':
      return 'Running';
    case 'spawning':
      return 'Starting';
    default:
      return 'Ending';
  }
}

/** Daemon-wide Prometheus metrics (text and PHP-FPM pages show the daemon differently). */
export interface DaemonMetric {
  metric: string;
  type: MetricType;
  help: string;
  samples: (s: StatusSnapshot) => Array<{ labels: Array<[string, string]>; value: number | undefined }>;
}

const listenerLabels = (l: ListenerStatus): Array<[string, string]> => [['listener', l.address], ['protocol', l.protocol], ['pool', l.pool]];

/** A listener's refusals by code, with its connections answered "overloaded" at accept. */
export function listenerRefusals(l: ListenerStatus): Array<[string, number]> {
  const all: Record<string, number> = { ...l.outcomes?.refusals };
  if ((l.overflowed ?? 0) > 0) all[ErrorCodes.TOO_MANY_CONNECTIONS] = (all[ErrorCodes.TOO_MANY_CONNECTIONS] ?? 0) + l.overflowed!;
  return codes(all);
}

const one = (value: number | undefined): Array<{ labels: Array<[string, string]>; value: number | undefined }> => [{ labels: [], value }];

export const DAEMON_METRICS: readonly DaemonMetric[] = [
  { metric: 'fcgipm_info', type: 'gauge', help: 'Always 1; the labels say which fcgi-pm this is.', samples: (s) => [{ labels: [['version', s.daemon.version], ['pid', String(s.daemon.pid)]], value: 1 }] },
  { metric: 'fcgipm_start_time_seconds', type: 'gauge', help: 'When fcgi-pm started, Unix time.', samples: (s) => one(s.daemon.startedAt / 1000) },
  { metric: 'fcgipm_reloads_total', type: 'counter', help: 'Config reloads by result.', samples: (s) => [{ labels: [['result', 'ok']], value: s.daemon.reloads.ok }, { labels: [['result', 'failed']], value: s.daemon.reloads.failed }] },
  { metric: 'fcgipm_process_resident_memory_bytes', type: 'gauge', help: "fcgi-pm's own resident memory.", samples: (s) => one(s.daemon.rss) },
  { metric: 'fcgipm_listener_refused_total', type: 'counter', help: 'Connections closed unread: client not in allowed_clients.', samples: (s) => s.listeners.map((l) => ({ labels: [['listener', l.address], ['protocol', l.protocol], ['pool', l.pool]] as Array<[string, string]>, value: l.refused })) },
  { metric: 'fcgipm_listener_accepted_total', type: 'counter', help: 'Front-end connections taken per listener.', samples: (s) => s.listeners.map((l) => ({ labels: [['listener', l.address], ['protocol', l.protocol], ['pool', l.pool]] as Array<[string, string]>, value: l.accepted })) },
  { metric: 'fcgipm_listener_responses_total', type: 'counter', help: 'Every request a listener took, by the status class of its answer (a pool\'s, or one given before any pool: status pages, unknown vhost).', samples: (s) => s.listeners.flatMap((l) => Object.entries(l.outcomes?.status ?? {}).map(([c, v]) => ({ labels: [...listenerLabels(l), ['class', c]] as Array<[string, string]>, value: v }))) },
  { metric: 'fcgipm_listener_refusals_total', type: 'counter', help: 'Answers fcgi-pm gave itself on a listener, by error code: refusals before any pool (ERR_VHOST_UNKNOWN, ERR_NO_POOL), connections over max_conns (ERR_TOO_MANY_CONNECTIONS) and every pool\'s refusals and failures.', samples: (s) => s.listeners.flatMap((l) => listenerRefusals(l).map(([c, v]) => ({ labels: [...listenerLabels(l), ['code', c]] as Array<[string, string]>, value: v }))) },
  { metric: 'fcgipm_listener_connections', type: 'gauge', help: 'Open front-end connections per listener.', samples: (s) => s.listeners.map((l) => ({ labels: [['listener', l.address], ['protocol', l.protocol], ['pool', l.pool]] as Array<[string, string]>, value: l.connections })) },
  { metric: 'fcgipm_memory_budget_bytes', type: 'gauge', help: 'memory_budget shared by all pools.', samples: (s) => one(s.memory?.budget) },
  { metric: 'fcgipm_memory_used_bytes', type: 'gauge', help: 'Measured memory of fcgi-pm and all workers.', samples: (s) => one(s.memory?.used) },
  { metric: 'fcgipm_memory_committed_bytes', type: 'gauge', help: 'Memory counted against the budget (each worker at least its estimate).', samples: (s) => one(s.memory?.committed) },
  { metric: 'fcgipm_memory_over_budget_total', type: 'counter', help: 'Times measured memory went over the budget and workers were retired.', samples: (s) => one(s.memory?.overBudget) },
  // vhosts: three series whatever the number of sites; per-site series are the active sites' pools.
  { metric: 'fcgipm_sites', type: 'gauge', help: 'vhost sites: defined, active (with a pool), broken (definition not valid).', samples: (s) => (s.sites === undefined ? [] : (['defined', 'active', 'broken'] as const).map((k) => ({ labels: [['state', k]] as Array<[string, string]>, value: s.sites![k] }))) },
];
