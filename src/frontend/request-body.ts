/**
 * A request body read to its end before the request goes to a pool, so the backend gets
 * a CONTENT_LENGTH (a chunked upload has none) and a slow upload holds no worker: bytes
 * stay in memory up to body_buffer_size, the rest goes to a file (mode 0600) in the
 * daemon's private runtime dir, as nginx's client_body_buffer_size and temp files do.
 * The file is removed by discard(), which the owner calls however the request ends.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, rmSync, type ReadStream, type WriteStream } from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import type { Readable } from 'node:stream';

export interface BodyBufferLimits {
  /** Bytes kept in memory before the body moves to a file. */
  memory: number;
  /** Most bytes accepted; past it the body is refused (413). */
  max: number;
  /** Directory for the file; undefined: the OS temp dir. */
  dir: string | undefined;
}

export type BodyOutcome = { ok: true } | { ok: false; tooLarge: boolean; err?: Error };

export class BufferedBody {
  /** Bytes received so far (the CONTENT_LENGTH once complete). */
  size = 0;
  /** The client stopped being read while the file catches up (not a stall of the client). */
  paused = false;
  private readonly limits: BodyBufferLimits;
  private chunks: Buffer[] = [];
  private file: WriteStream | undefined;
  private path: string | undefined;
  private reader: ReadStream | undefined;
  private done: ((o: BodyOutcome) => void) | undefined;
  private src: Readable | undefined;
  private discarded = false;

  constructor(limits: BodyBufferLimits) {
    this.limits = limits;
  }

  /** File the body spilled to, if it did (tests and logs). */
  get filePath(): string | undefined {
    return this.path;
  }

  /** Reads `src` to its end; `done` is called once (not after discard()). */
  collect(src: Readable, done: (o: BodyOutcome) => void): void {
    this.src = src;
    this.done = done;
    src.on('data', (c: Buffer) => this.onData(c));
    src.on('end', () => this.onEnd());
  }

  private onData(c: Buffer): void {
    if (this.done === undefined) return;
    this.size += c.length;
    if (this.size > this.limits.max) {
      this.finish({ ok: false, tooLarge: true });
      return;
    }
    if (this.file === undefined && this.size <= this.limits.memory) {
      this.chunks.push(c);
      return;
    }
    const f = this.file ?? this.openFile();
    if (!f.write(c) && !this.paused) {
      this.paused = true;
      this.src!.pause();
      f.once('drain', () => {
        this.paused = false;
        this.src?.resume();
      });
    }
  }

  private openFile(): WriteStream {
    this.path = nodePath.join(this.limits.dir ?? os.tmpdir(), `body-${process.pid}-${randomBytes(8).toString('hex')}`);
    const f = createWriteStream(this.path, { flags: 'wx', mode: 0o600 });
    f.on('error', (err) => this.finish({ ok: false, tooLarge: false, err }));
    for (const b of this.chunks) f.write(b);
    this.chunks = [];
    this.file = f;
    return f;
  }

  private onEnd(): void {
    if (this.done === undefined) return;
    if (this.file === undefined) this.finish({ ok: true });
    else this.file.end(() => this.finish({ ok: true }));
  }

  private finish(o: BodyOutcome): void {
    const done = this.done;
    this.done = undefined;
    if (!o.ok) this.discard();
    done?.(o);
  }

  /**
   * Replays the body into `push` (false: wait for resume()), then calls `end`.
   * Memory chunks go at once; a file is read as fast as the consumer takes it.
   */
  replay(push: (c: Buffer) => boolean, end: () => void): void {
    if (this.path === undefined) {
      for (const c of this.chunks) push(c);
      this.chunks = [];
      end();
      return;
    }
    const r = createReadStream(this.path, { highWaterMark: 64 * 1024 });
    this.reader = r;
    r.on('data', (c) => {
      if (!push(c as Buffer)) r.pause();
    });
    r.on('end', end);
    // The file is ours and complete; a read error means the request was torn down.
    r.on('error', () => this.discard());
  }

  /** The consumer wants more after push() returned false. */
  resume(): void {
    this.reader?.resume();
  }

  /** Drops the body and removes its file; safe to call more than once. */
  discard(): void {
    if (this.discarded) return;
    this.discarded = true;
    this.done = undefined;
    this.chunks = [];
    this.reader?.destroy();
    const path = this.path;
    if (path === undefined) return;
    const f = this.file;
    rmSync(path, { force: true });
    // A stream destroyed before its open finished still creates the file: remove it once closed.
    if (f !== undefined && !f.closed) f.once('close', () => rmSync(path, { force: true }));
    f?.destroy();
  }
}
