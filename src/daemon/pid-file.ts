/**
 * The pid file (`pid_file`; as root by default <runtime base>/fcgi-pm.pid): for init
 * scripts, monitoring and `kill -USR1 $(cat ...)`. Written whole (a temp file renamed
 * over it); removed on exit only while it still names this process, so the daemon that
 * replaced us in an upgrade in place keeps its own.
 */
import { readFileSync, renameSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import * as nodePath from 'node:path';
import { runtimeBase, type RuntimeSetting } from './runtime-dir.js';

export interface PidFileSetting extends RuntimeSetting {
  pidFile?: string | false | undefined;
}

/** The pid file's path, or undefined for none (not configured and not root, or "off"). */
export function pidFilePath(cfg: PidFileSetting, uid = process.getuid?.() ?? -1): string | undefined {
  if (cfg.pidFile === false) return undefined;
  if (cfg.pidFile !== undefined) return cfg.pidFile;
  return uid === 0 ? nodePath.join(runtimeBase(cfg, process.env, uid), 'fcgi-pm.pid') : undefined;
}

export function writePidFile(path: string, pid = process.pid): void {
  mkdirSync(nodePath.dirname(path), { recursive: true, mode: 0o755 });
  const temp = `${path}.${pid}.tmp`;
  writeFileSync(temp, `${pid}\n`, { mode: 0o644 });
  renameSync(temp, path);
}

/** Removes the file if it names `pid`; true when removed. */
export function removePidFile(path: string, pid = process.pid): boolean {
  try {
    if (readFileSync(path, 'utf8').trim() !== String(pid)) return false;
    unlinkSync(path);
    return true;
  } catch {
    return false;
  }
}
