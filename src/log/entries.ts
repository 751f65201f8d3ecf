/**
 * Lines of process output → log entries. A Python traceback, a uWSGI banner or a PHP
 * warning spanning lines is one entry, not one warning per line. A line joins the open
 * entry when it came in the same read as the line before it, or in a read within
 * ENTRY_GAP_MS of it and looks like a continuation: indented, or inside a "Traceback"
 * block (which ends with its first unindented line, the exception). Otherwise, and
 * ENTRY_GAP_MS after the last read, the entry is complete; a traceback still waiting for
 * its exception line stays open up to TRACEBACK_GAP_MS, because Python writes it line by
 * line and a busy machine can pause the writer longer than ENTRY_GAP_MS between two lines.
 * Entries are capped (MAX_ENTRY_LINES, MAX_ENTRY_BYTES); a longer burst goes on in a new entry.
 */

/** Writers flush a block in one go; the next read of the same block comes well within this. */
export const ENTRY_GAP_MS = 5;
export const TRACEBACK_GAP_MS = 1000;
export const MAX_ENTRY_LINES = 100;
export const MAX_ENTRY_BYTES = 16 * 1024;

const CONTINUATION = /^\s/;

export class EntryGrouper {
  private lines: string[] = [];
  private bytes = 0;
  private traceback = false;
  private firstOfRead = true;
  private timer: NodeJS.Timeout | undefined;
  private timerGap = 0;

  constructor(
    private readonly emit: (text: string) => void,
    private readonly gapMs = ENTRY_GAP_MS,
    private readonly tracebackGapMs = TRACEBACK_GAP_MS,
  ) {}

  /** Call before the lines of one read. */
  beginRead(): void {
    this.firstOfRead = true;
  }

  add(line: string): void {
    const sameRead = !this.firstOfRead;
    this.firstOfRead = false;
    if (this.lines.length > 0) {
      const joins = sameRead || this.traceback || CONTINUATION.test(line);
      const fits = this.lines.length < MAX_ENTRY_LINES && this.bytes + line.length < MAX_ENTRY_BYTES;
      if (!joins || !fits) this.flush();
    }
    if (this.lines.length === 0) this.traceback = line.startsWith('Traceback');
    else if (this.traceback && !CONTINUATION.test(line)) this.traceback = false; // the exception line
    this.lines.push(line);
    this.bytes += line.length + 1;
  }

  /** Call after the lines of one read: the entry stays open for its gap. */
  endRead(): void {
    if (this.lines.length === 0) return;
    const gap = this.traceback ? this.tracebackGapMs : this.gapMs;
    if (this.timer !== undefined && this.timerGap === gap) {
      this.timer.refresh();
      return;
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerGap = gap;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, gap);
    this.timer.unref();
  }

  /** Emits the open entry now (stream end, or a line that starts a new one). */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lines.length === 0) return;
    const text = this.lines.join('\n');
    this.lines = [];
    this.bytes = 0;
    this.traceback = false;
    this.emit(text);
  }
}
