/**
 * Where the control socket lives when the config does not say: the daemon binds there
 * and `fcgi-pm status|reload|stop|workers` look there, so both must derive it the same
 * way (this function). In order:
 *   1. control_socket as configured ("off" disables it);
 *   2. <runtime_dir>/control.sock when runtime_dir is set;
 *   3. else a name of the config file's own, <name>-<hash>.sock (the file's base name and
 *      a hash of its real path), so daemons started from two files never share one, in
 *      /run/fcgi-pm as root (systemd's RuntimeDirectory=fcgi-pm), else
 *      $XDG_RUNTIME_DIR/fcgi-pm, else <os tmpdir>/fcgi-pm-<uid>;
 *   4. the quick form (no config file) uses control.sock in that directory, which is
 *      also where the CLI looks when given neither -c FILE nor --control PATH.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';

export const CONTROL_SOCKET_NAME = 'control.sock';

export interface ControlSocketSetting {
  /** As configured: a path, false for "off", undefined for the default. */
  controlSocket?: string | false | undefined;
  runtimeDir?: string | undefined;
  /** Absolute path of the config file (Config.source); anything else is the quick form. */
  source?: string | undefined;
}

/** The directory default control sockets go in, for this user. */
export function defaultControlDir(env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  if (uid === 0) return '/run/fcgi-pm';
  const xdg = env['XDG_RUNTIME_DIR'];
  if (xdg !== undefined && xdg.startsWith('/')) return nodePath.join(xdg, 'fcgi-pm');
  return nodePath.join(os.tmpdir(), `fcgi-pm-${uid}`);
}

/** "<base name>-<10 hex of sha256(real path)>.sock" for a config file; control.sock for the quick form. */
export function controlSocketName(source: string | undefined): string {
  if (source === undefined || !nodePath.isAbsolute(source)) return CONTROL_SOCKET_NAME;
  const real = realPath(source);
  const base = nodePath.basename(real).replace(/\.(ya?ml|json)$/i, '').replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
  return `${base}-${createHash('sha256').update(real).digest('hex').slice(0, 10)}.sock`;
}

/** The file's real path (symlinks resolved), or the path as given when it cannot be resolved (removed since). */
export function realPath(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return nodePath.resolve(file);
  }
}

export function defaultControlSocket(cfg: Omit<ControlSocketSetting, 'controlSocket'>, env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  if (cfg.runtimeDir !== undefined) return nodePath.join(cfg.runtimeDir, CONTROL_SOCKET_NAME);
  return nodePath.join(defaultControlDir(env, uid), controlSocketName(cfg.source));
}

/** The path to bind / connect to, or undefined when the control socket is off. */
export function controlSocketPath(cfg: ControlSocketSetting): string | undefined {
  if (cfg.controlSocket === false) return undefined;
  return cfg.controlSocket ?? defaultControlSocket(cfg);
}

/** True when the path is the derived default rather than configured. */
export function isDefaultControlSocket(cfg: ControlSocketSetting): boolean {
  return cfg.controlSocket === undefined;
}
