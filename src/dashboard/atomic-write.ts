/**
 * Writing a config or site file the dashboard edited, as an editor that cares would: only
 * when the file still holds the text the edit was made from (its hash; a hand edit in
 * between is refused, not overwritten), the old text kept as FILE.bak, the new one
 * written to a temp file in the same directory (same mode), flushed and renamed over the
 * file, so a reader (the daemon, the site directory's watcher) sees the old file or the
 * new one, never half of one.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import * as nodePath from 'node:path';

export const hashText = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** The file changed since the edit read it. */
export class EditConflict extends Error {
  constructor(readonly file: string) {
    super(`${file} changed since it was read (edited by hand, or by another page?); nothing was written: load the current values and edit again`);
  }
}

/** Writes `text` over `file` when its content still hashes to `expected`; returns the backup's path. */
export function writeIfUnchanged(file: string, expected: string, text: string): string {
  const current = readFileSync(file, 'utf8');
  if (hashText(current) !== expected) throw new EditConflict(file);
  const mode = statSync(file).mode & 0o7777;
  const dir = nodePath.dirname(file);
  const base = nodePath.basename(file);
  const backup = `${file}.bak`;
  writeDurably(nodePath.join(dir, `.${base}.bak.tmp-${process.pid}`), current, mode, backup);
  // A dot name the site directory's watcher skips (it reads NAME.yaml, not .NAME.yaml.tmp-…).
  writeDurably(nodePath.join(dir, `.${base}.tmp-${process.pid}`), text, mode, file);
  return backup;
}

function writeDurably(tmp: string, text: string, mode: number, target: string): void {
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, target);
}
