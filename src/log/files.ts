/**
 * Where the daemon's logs go: stdout or log.file, and log.access_file for access lines.
 * Files are opened for appending and reopened on SIGUSR1 (logrotate's copy-free
 * "move, then signal" rotation): SonicBoom's reopen() finishes pending writes, then
 * opens the path again, creating a new file where the old one was moved away.
 */
import { pino } from 'pino';
import type { Config } from '../config/types.js';
import { createLogger, type Logger } from './log.js';

type Boom = ReturnType<typeof pino.destination>;

function openFile(path: string): Boom {
  return pino.destination({ dest: path, sync: false, append: true, mkdir: true });
}

export class LogFiles {
  readonly logger: Logger;
  private main: Boom;
  private mainPath: string | undefined;
  private readonly format: Config['log']['format'];
  private accessStream: Boom | undefined;
  private accessPath: string | undefined;

  constructor(log: Config['log']) {
    this.mainPath = log.file;
    this.format = log.format;
    this.main = log.file === undefined ? pino.destination({ dest: 1, sync: false }) : openFile(log.file);
    // Human lines only where people read them: auto means pretty on a terminal stdout.
    this.logger = createLogger({ level: log.level, destination: this.main, format: log.format, isTTY: log.file === undefined && process.stdout.isTTY === true });
    this.accessPath = log.accessFile;
    this.accessStream = log.accessFile === undefined ? undefined : openFile(log.accessFile);
  }

  /** log.access_file's stream, if set. */
  get access(): Boom | undefined {
    return this.accessStream;
  }

  /** SIGUSR1: reopen every file at its path. Returns the paths reopened. */
  reopen(): string[] {
    const done: string[] = [];
    if (this.mainPath !== undefined) {
      this.main.reopen();
      done.push(this.mainPath);
    }
    if (this.accessStream !== undefined && this.accessPath !== undefined) {
      this.accessStream.reopen();
      done.push(this.accessPath);
    }
    return done;
  }

  /**
   * Applies a reloaded config's log settings. Returns messages about what could not be
   * applied (moving the main log from stdout to a file, or back, needs a restart).
   */
  apply(log: Config['log']): string[] {
    const notes: string[] = [];
    this.logger.level = log.level;
    if (log.format !== this.format) notes.push(`log.format changed from ${this.format} to ${log.format}: that takes a restart`);
    if (log.file !== this.mainPath) {
      if (log.file !== undefined && this.mainPath !== undefined) {
        this.main.reopen(log.file);
        this.mainPath = log.file;
      } else {
        notes.push(`log.file changed from ${this.mainPath ?? 'stdout'} to ${log.file ?? 'stdout'}: that takes a restart`);
      }
    }
    if (log.accessFile !== this.accessPath) {
      const old = this.accessStream;
      this.accessPath = log.accessFile;
      this.accessStream = log.accessFile === undefined ? undefined : openFile(log.accessFile);
      // Lines already handed to the old stream still get written before it closes.
      if (old !== undefined) old.end();
    }
    return notes;
  }

  /**
   * Before an exec in place: resolves once every line is written and the streams are
   * closed (stdout stays open: the new code writes there). flush() is not enough: it does
   * not wait for a write under way in libuv's threads, which an exec ends.
   */
  end(): Promise<void> {
    const one = (b: Boom | undefined): Promise<void> =>
      new Promise((resolve) => {
        if (b === undefined) return resolve();
        b.once('close', () => resolve());
        b.once('error', () => resolve());
        b.end();
      });
    return Promise.all([one(this.main), one(this.accessStream)]).then(() => undefined);
  }

  flush(): Promise<void> {
    const one = (b: Boom | undefined): Promise<void> =>
      new Promise((resolve) => {
        if (b === undefined) return resolve();
        try {
          b.flush(() => resolve());
        } catch {
          resolve();
        }
      });
    return Promise.all([one(this.main), one(this.accessStream)]).then(() => undefined);
  }
}
