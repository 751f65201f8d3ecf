/**
 * The output side of a front-end FastCGI connection: response records coalesced per
 * tick (here: the socket callback running, src/util/turn.ts). A response head (or a small first record) is held for the rest of its tick so
 * that its first body bytes (or its end) leave in the same record; small records are
 * copied into one buffer, larger ones go out as views (writev); what is written in one
 * tick leaves in one uncork. A response that comes whole (the usual page: head, body and
 * end in one backend chunk) leaves as one buffer in a plain write, never corked: the
 * stream's cork, buffer and uncork cost more than the write itself.
 * A request whose write hit a full socket waits for the drain here.
 */
import type { Socket } from 'node:net';
import { RecordType, encodeRecordsAndEnd, encodeStdout, encodeStream, joinAdjacent, setRequestIds } from '../protocol/fastcgi.js';
import { atTurnEnd, turnNow, type TurnEnd } from '../util/turn.js';
import { clearArray } from '../util/clear-array.js';
import type { Stamped } from '../util/idle-watch.js';
import type { FcgiOutput, FcgiRequest } from './fastcgi-request.js';

/** A head with body bytes up to this size is held for the tick, so that head, body and end can leave together. */
const HOLD_LIMIT = 64 * 1024;
/** Up to this size a head with its body is copied into one record buffer (one small copy beats writev entries). */
const SMALL_RECORD = 1024;

const EMPTY = Buffer.alloc(0);

export class FcgiWriter implements FcgiOutput, TurnEnd {
  private readonly socket: Socket;
  /** The session closed: nothing more is written. */
  private readonly closed: () => boolean;
  private drainWaiters: FcgiRequest[] = [];
  /** The socket is corked until the end of this tick. */
  private corked = false;
  /** The end-of-tick flush (held heads, the uncork) is scheduled. */
  private scheduled = false;
  /** Scratch list for encodeStream, reused for every write. */
  private readonly out: Buffer[] = [];
  /** Requests whose head waits for its first body bytes; flushed before the tick's uncork at the latest. */
  private readonly pendingHeads: FcgiRequest[] = [];
  /** Whole small responses, written at the end of the tick (after the backend got its next request). */
  private readonly finished: Buffer[] = [];
  /** Stamped when bytes are written (its idle timeout: src/util/idle-watch.ts). */
  private readonly active: Stamped;

  constructor(socket: Socket, closed: () => boolean, active: Stamped) {
    this.socket = socket;
    this.closed = closed;
    this.active = active;
  }

  /** One stream's bytes as records (small ones copied into one buffer, larger ones as views). */
  stream(type: number, id: number, data: Buffer): boolean {
    if (this.closed()) return true;
    const out = this.out;
    encodeStream(type, id, data, out);
    const ok = this.writeList(out);
    clearArray(out);
    return ok;
  }

  /**
   * The response head. It is held for the rest of this tick: the backend's first body
   * bytes (usually delivered right after it) or the end then leave in the same record.
   */
  head(r: FcgiRequest, raw: Buffer): void {
    if (this.closed()) return;
    r.pendingHead = raw;
    this.pendingHeads.push(r);
    this.schedule();
  }

  body(r: FcgiRequest, chunk: Buffer): boolean {
    if (this.closed() || chunk.length === 0) return true;
    const head = r.pendingHead;
    if (head !== undefined) {
      if (r.pendingBody === undefined && head.length + chunk.length <= HOLD_LIMIT) {
        // Held with the head for the rest of the tick: a small response then leaves as one buffer with its end.
        r.pendingBody = chunk;
        return true;
      }
      this.held(r, false);
    }
    // Small chunks are copied into one record buffer; larger ones go out as views (writev), never copied.
    return this.waitIfFull(r, this.stream(RecordType.Stdout, r.id, chunk));
  }

  /**
   * A backend's STDOUT record, forwarded as it is but for the request id (rewritten in
   * place: the bytes are the backend connection's and read once).
   */
  record(r: FcgiRequest, raw: Buffer): boolean {
    if (this.closed()) return true;
    if (r.pendingHead !== undefined) this.held(r, false);
    const id = r.id;
    if (raw[2] !== id >> 8 || raw[3] !== (id & 0xff)) {
      raw[2] = id >> 8;
      raw[3] = id & 0xff;
    }
    const prev = r.pendingRecord;
    if (prev !== undefined) {
      // The next record of the backend's chunk lies right after it: one view.
      const joined = prev.length + raw.length <= SMALL_RECORD ? joinAdjacent(prev, raw) : undefined;
      if (joined !== undefined) {
        r.pendingRecord = joined;
        return true;
      }
      this.held(r, false);
    }
    if (raw.length <= SMALL_RECORD) {
      // Held for the tick: a small response then leaves with its end as one buffer (one
      // write, not a writev): the backend's own end records when they follow it in its
      // chunk (one view, no copy), else a copy with ours.
      r.pendingRecord = raw;
      if (prev === undefined) this.pendingHeads.push(r); // else it is there since prev was held
      this.schedule();
      return true;
    }
    return this.waitIfFull(r, this.write1(raw));
  }

  /** `ok` false: the socket's buffer is full; r's exchange hears of the drain. */
  private waitIfFull(r: FcgiRequest, ok: boolean): boolean {
    if (!ok && !r.awaitingDrain) {
      r.awaitingDrain = true;
      this.drainWaiters.push(r);
    }
    return ok;
  }

  /**
   * Writes the held head and first body bytes, with `end` the empty STDOUT and
   * END_REQUEST too: one buffer when small, which joins this tick's cork if there is one
   * and else goes out at once; else the data as views (head and body are one view when
   * they lie side by side in the backend's chunk, as they usually do). Held backend
   * records end with the backend's own closing records (`endRecords`, ids rewritten) when
   * those lie right after them: one view; else with ours.
   */
  held(r: FcgiRequest, end: boolean, endRecords?: Buffer): void {
    // Only small records are held (record()), so a copy with ours stays small.
    const rec = r.pendingRecord;
    if (rec !== undefined) {
      r.pendingRecord = undefined;
      if (!end) {
        this.send(rec);
        return;
      }
      const whole = endRecords === undefined ? undefined : joinAdjacent(rec, endRecords);
      if (whole !== undefined) {
        setRequestIds(endRecords!, r.id);
        this.finish(whole);
      } else this.finish(encodeRecordsAndEnd(r.id, rec));
      return;
    }
    const head = r.pendingHead ?? EMPTY;
    const body = r.pendingBody ?? EMPTY;
    r.pendingHead = r.pendingBody = undefined;
    if (end && endRecords !== undefined && head.length + body.length === 0) {
      this.finish(this.closing(r, endRecords));
      return;
    }
    if (head.length + body.length <= SMALL_RECORD) {
      const buf = encodeStdout(r.id, head, body, end);
      if (end) this.finish(buf);
      else this.send(buf);
      return;
    }
    const joined = joinAdjacent(head, body);
    if (joined !== undefined) this.stream(RecordType.Stdout, r.id, joined);
    else {
      this.stream(RecordType.Stdout, r.id, head);
      this.stream(RecordType.Stdout, r.id, body);
    }
    if (end) this.write1(encodeStdout(r.id, EMPTY, EMPTY, true));
  }

  /** The closing records of r: the backend's (its END_REQUEST, after its empty STDOUT if it sent one), ids rewritten, else ours. */
  private closing(r: FcgiRequest, endRecords: Buffer | undefined): Buffer {
    if (endRecords === undefined) return encodeStdout(r.id, EMPTY, EMPTY, true);
    setRequestIds(endRecords, r.id);
    return endRecords;
  }

  write1(buf: Buffer): boolean {
    if (this.closed()) return true;
    this.cork();
    return this.socket.write(buf);
  }

  /** One buffer: with what this tick corked, or on its own at once. */
  private send(buf: Buffer): boolean {
    if (this.closed()) return true;
    this.active.activeAt = turnNow();
    return this.socket.write(buf);
  }

  /**
   * A whole response (its last bytes and END_REQUEST), written at the end of this tick:
   * the request's end frees its worker, which gets the next queued request first in the
   * same tick (a backend kept busy), and nothing of the request follows it.
   */
  private finish(buf: Buffer): void {
    if (this.closed()) return;
    this.finished.push(buf);
    this.schedule();
  }

  private writeList(bufs: Buffer[]): boolean {
    if (this.closed()) return true;
    this.cork();
    let ok = true;
    for (let i = 0; i < bufs.length; i++) ok = this.socket.write(bufs[i]!);
    return ok;
  }

  /** Everything written from now to the end of this tick leaves in one writev. */
  private cork(): void {
    if (this.corked) return;
    this.corked = true;
    this.socket.cork();
    this.schedule();
  }

  /** The end-of-tick flush, once per tick: at the end of the socket callback running now (src/util/turn.ts). */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // What this turn writes leaves at its end: the same time, as turnNow reads it.
    this.active.activeAt = turnNow();
    atTurnEnd(this);
  }

  /** Sends what this tick held and corked now (the session is closing). */
  flush(): void {
    if (this.scheduled) this.endOfTurn();
  }

  /** A response is waiting for the socket to drain (the client stopped reading). */
  get waitingForDrain(): boolean {
    return this.drainWaiters.length > 0;
  }

  /** The session aborted its requests: none waits for a drain any more. */
  forgetDrainWaiters(): void {
    this.drainWaiters = [];
  }

  /** @internal turn-end target: held heads go out with what body they have, finished responses, then the corked writes. */
  endOfTurn(): void {
    if (!this.scheduled) return; // flushed early (the session closed)
    this.scheduled = false;
    if (this.pendingHeads.length > 0) this.flushHeads();
    const done = this.finished;
    if (done.length > 0) {
      // Accepted while the session was open: written even if it closes gracefully now (not once destroyed).
      const socket = this.socket;
      if (done.length > 1 && !this.corked) {
        this.corked = true; // one writev for them all
        socket.cork();
      }
      for (let i = 0; i < done.length; i++) if (!socket.destroyed) socket.write(done[i]!);
      clearArray(done);
    }
    if (!this.corked) return;
    this.corked = false;
    this.socket.uncork();
  }

  /** Heads not joined by the end within their tick (a streaming backend) go out with what body they have. */
  private flushHeads(): void {
    const list = this.pendingHeads;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      if (r.pendingHead === undefined && r.pendingRecord === undefined) continue;
      if (r.state !== 'ended') this.held(r, false);
      else r.pendingHead = r.pendingBody = r.pendingRecord = undefined;
    }
    clearArray(list);
  }

  /** The socket drained: the exchanges that waited for it hear of it. */
  onDrain(): void {
    this.active.activeAt = turnNow();
    const waiters = this.drainWaiters;
    if (waiters.length === 0) return;
    this.drainWaiters = [];
    for (const r of waiters) {
      r.awaitingDrain = false;
      if (r.state !== 'ended') r.exchange?.responseDrained();
    }
  }
}
