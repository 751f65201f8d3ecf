/**
 * Workers handed on by an exec in place of the daemon that the new code does not adopt
 * (their pool changed or went): still our children, so they are stopped and reaped here
 * (SIGTERM to the group, SIGKILL after the kill timeout), their pipes and socket file
 * removed once they exited.
 */
import { closeSync } from 'node:fs';
import type { Logger } from '../log/log.js';
import { ErrorCodes } from '../errors.js';
import { signalGroup, watchChild } from './reaper.js';
import { unlinkQuiet } from './socket.js';
import type { HandedWorker } from './types.js';

export const HANDED_KILL_MS = 10_000;

export function endHanded(workers: readonly HandedWorker[], log: Logger, killMs = HANDED_KILL_MS): void {
  for (const h of workers) {
    signalGroup(h.pid, 'SIGTERM');
    const timer = setTimeout(() => {
      log.warn({ code: ErrorCodes.KILL_TIMEOUT, wpid: h.pid }, `handed worker ${h.pid} did not exit within ${killMs} ms after SIGTERM; sending SIGKILL`);
      signalGroup(h.pid, 'SIGKILL');
    }, killMs);
    timer.unref();
    watchChild(h.pid, () => {
      clearTimeout(timer);
      // Members of its group that outlived it still hold the socket.
      signalGroup(h.pid, 'SIGKILL');
      for (const fd of [h.out, h.err]) {
        try {
          closeSync(fd);
        } catch {
          // not inherited
        }
      }
      unlinkQuiet(h.socket);
    });
  }
}
