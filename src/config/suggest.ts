/**
 * "Did you mean" for misspelt keys and names, plus the PHP-FPM spellings operators
 * bring with them (pm.max_children, request_terminate_timeout, ...).
 */

/** PHP-FPM pool directives → our key. */
const PHP_FPM_NAMES: Record<string, string> = {
  'pm.max_children': 'max_children',
  'pm.start_servers': 'start_children',
  'pm.min_spare_servers': 'min_spare',
  'pm.max_spare_servers': 'max_spare',
  'pm.max_spawn_rate': 'max_spawn_rate',
  'pm.process_idle_timeout': 'idle_timeout',
  'pm.max_requests': 'max_requests',
  request_terminate_timeout: 'request_timeout',
  request_slowlog_timeout: 'slow_request',
  process_control_timeout: 'shutdown_timeout',
  'listen.mode': 'mode',
  listen_mode: 'mode',
  clear_env: 'inherit_env',
  chdir: 'cwd',
  start_servers: 'start_children',
  min_spare_servers: 'min_spare',
  max_spare_servers: 'max_spare',
  process_idle_timeout: 'idle_timeout',
  docroot: 'document_root',
  fcgi: 'fastcgi',
  root: 'document_root',
};

/**
 * Log settings under the names people bring (the first issue text's top-level
 * log_file/access_log, PHP-FPM's global error_log and log_level) → their key in `log:`.
 * A did-you-mean, not an alias: one spelling in configs and docs.
 */
const LOG_NAMES: Record<string, string> = {
  log_file: 'file',
  error_log: 'file',
  access_log: 'access_file',
  access_log_file: 'access_file',
  log_level: 'level',
  log_format: 'format',
  access_log_format: 'access_format',
};

/** "log.file" for a top-level "log_file" (or another LOG_NAMES spelling), else undefined. */
export function logKeyFor(word: string): string | undefined {
  const key = LOG_NAMES[word.toLowerCase().replace(/-/g, '_')];
  return key === undefined ? undefined : `log.${key}`;
}

/** Edit distance (insert, delete, substitute, swap neighbours). */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[(i - 1) * cols + j]! + 1, d[i * cols + j - 1]! + 1, d[(i - 1) * cols + j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[(i - 2) * cols + j - 2]! + 1);
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1]!;
}

/** The closest candidate when it is close enough to be a typo, else undefined. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  const w = word.toLowerCase().replace(/-/g, '_');
  const alias = PHP_FPM_NAMES[w] ?? LOG_NAMES[w];
  const list = [...candidates];
  if (alias !== undefined && list.includes(alias)) return alias;
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of list) {
    const dist = c === w ? 0.5 : editDistance(w, c); // only case or dashes differ
    if (dist < bestD) {
      bestD = dist;
      best = c;
    }
  }
  const limit = Math.max(2, Math.floor(w.length / 3));
  if (best !== undefined && bestD <= limit) return best;
  // "pm.max_children" style: a known key after a dotted prefix.
  const tail = w.slice(w.lastIndexOf('.') + 1);
  return tail !== w && list.includes(tail) ? tail : undefined;
}

/** ' (did you mean "x"?)' or ''. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const c = closest(word, candidates);
  return c === undefined ? '' : ` (did you mean "${c}"?)`;
}
