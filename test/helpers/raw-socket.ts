/**
 * Raw byte conversations with a listener: send bytes (optionally in pieces), collect
 * everything received, and learn how the connection ended (peer end, reset, or still
 * open when we gave up).
 */
import type { Socket } from 'node:net';
import { connectTo, type ConnectTarget } from './wait.js';

export interface RawResult {
  received: Buffer;
  /** 'end': the peer closed; 'reset': ECONNRESET/EPIPE; 'timeout': still open after waitMs. */
  ended: 'end' | 'reset' | 'timeout';
  error: string | undefined;
  /** Milliseconds from connect to the end. */
  elapsed: number;
}

export class RawConn {
  readonly socket: Socket;
  readonly connected: Promise<void>;
  private chunks: Buffer[] = [];
  private endState: 'end' | 'reset' | undefined;
  private err: string | undefined;
  private readonly closedP: Promise<void>;
  private readonly started = Date.now();
  private dataWaiters: Array<() => void> = [];

  constructor(target: ConnectTarget) {
    this.socket = connectTo(target);
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.on('data', (c: Buffer) => {
      this.chunks.push(c);
      const w = this.dataWaiters;
      this.dataWaiters = [];
      for (const f of w) f();
    });
    this.socket.on('error', (e: NodeJS.ErrnoException) => {
      this.err = e.code ?? e.message;
      this.endState = 'reset';
    });
    this.closedP = new Promise((resolve) => {
      this.socket.once('close', () => {
        if (!this.endState) this.endState = 'end';
        const w = this.dataWaiters;
        this.dataWaiters = [];
        for (const f of w) f();
        resolve();
      });
    });
  }

  get received(): Buffer {
    return Buffer.concat(this.chunks);
  }

  get closed(): boolean {
    return this.endState !== undefined;
  }

  write(b: Buffer | string): void {
    if (!this.socket.destroyed) this.socket.write(b);
  }

  /** Half-close our side (FIN). */
  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** Resolves when received bytes satisfy pred, or the socket closed, or waitMs passed. */
  async waitData(pred: (b: Buffer) => boolean, waitMs = 5000): Promise<Buffer> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const b = this.received;
      if (pred(b) || this.closed || Date.now() >= deadline) return b;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.dataWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Waits for the peer to close, up to waitMs; then reports and destroys our end. */
  async waitClose(waitMs = 5000): Promise<RawResult> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.closedP, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    const ended = this.endState ?? 'timeout';
    const res: RawResult = { received: this.received, ended, error: this.err, elapsed: Date.now() - this.started };
    this.socket.destroy();
    return res;
  }
}

/** Connects, writes `pieces` in order (pausing `gapMs` between), then waits for close. */
export async function rawExchange(
  target: ConnectTarget,
  pieces: Array<Buffer | string>,
  opts: { waitMs?: number; gapMs?: number; halfClose?: boolean } = {},
): Promise<RawResult> {
  const c = new RawConn(target);
  await c.connected;
  for (const p of pieces) {
    c.write(p);
    if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
  }
  if (opts.halfClose) c.end();
  return c.waitClose(opts.waitMs ?? 5000);
}
