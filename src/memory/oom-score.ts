/**
 * /proc/PID/oom_score_adj: which process the kernel's OOM killer picks first, inside a
 * memory cgroup as on the whole host. Workers get a high value so the kernel takes a
 * worker (whose request fcgi-pm answers 503) rather than fcgi-pm itself. Raising a
 * value needs no privilege; lowering one below what the process started with needs
 * CAP_SYS_RESOURCE (root).
 */
import fs from 'node:fs';
import type { Logger } from '../log/log.js';

/** Default for workers: well above any ordinary process (0), below "always first" (1000). */
export const WORKER_OOM_SCORE_ADJ = 800;
/** Default for fcgi-pm itself, where it may lower its own (root). */
export const DAEMON_OOM_SCORE_ADJ = -500;

/** Writes `value` for `pid` ("self" for this process); the error code (EACCES, ESRCH …) when it could not. */
export function setOomScoreAdj(pid: number | 'self', value: number): string | undefined {
  try {
    fs.writeFileSync(`/proc/${pid}/oom_score_adj`, String(value));
    return undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  }
}

export function readOomScoreAdj(pid: number | 'self'): number | undefined {
  try {
    const n = Number(fs.readFileSync(`/proc/${pid}/oom_score_adj`, 'latin1').trim());
    return Number.isInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** At start: fcgi-pm's own oom_score_adj to `value` (default DAEMON_OOM_SCORE_ADJ), one line saying what came of it. */
export function adjustOwnOomScore(value: number | undefined, log: Logger): void {
  const want = value ?? DAEMON_OOM_SCORE_ADJ;
  const before = readOomScoreAdj('self');
  if (before === undefined || before === want) return;
  const err = setOomScoreAdj('self', want);
  if (err === undefined) log.info({ oomScoreAdj: want, before }, `oom_score_adj of fcgi-pm set to ${want} (was ${before}): the kernel's OOM killer takes workers first`);
  else log.info({ oomScoreAdj: before, wanted: want, errno: err }, `oom_score_adj of fcgi-pm stays ${before} (setting ${want} failed: ${err}; lowering it needs CAP_SYS_RESOURCE); workers still get a higher one`);
}
