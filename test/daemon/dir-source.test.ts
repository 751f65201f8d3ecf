// vhosts.dir's safety net while the directory is watched: a poll stats the directory and
// a tenth of the files in turn, and asks for a rescan only when one of them changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirSource, WATCHED_POLL_SPREAD } from '../../src/daemon/vhosts/dir-source.js';

const FILES = 25;

function siteDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fcgi-pm-dirsrc-'));
  for (let i = 0; i < FILES; i++) writeFileSync(join(dir, `s${i}.yaml`), `names: [s${i}.test]\ndocument_root: /srv/s${i}\n`);
  return dir;
}

const polls = (src: DirSource, n: number): number => {
  let changed = 0;
  for (let i = 0; i < n; i++) if (src.changedSinceRead()) changed++;
  return changed;
};

test('nothing changed since the rescan: no poll asks for another', async () => {
  const dir = siteDir();
  try {
    const src = new DirSource(dir, { defaults: { command: ['php-cgi'] } } as never, 2000);
    assert.equal((await src.read()).sites.length, FILES);
    assert.equal(polls(src, 3 * WATCHED_POLL_SPREAD), 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file edited in place (no watch event) is found within WATCHED_POLL_SPREAD polls, whichever it is', async () => {
  const dir = siteDir();
  try {
    const src = new DirSource(dir, { defaults: { command: ['php-cgi'] } } as never, 2000);
    for (const i of [0, 7, FILES - 1]) {
      await src.read();
      polls(src, i % WATCHED_POLL_SPREAD); // the cursor anywhere
      appendFileSync(join(dir, `s${i}.yaml`), '# edited\n');
      let found = 0;
      for (let k = 1; k <= WATCHED_POLL_SPREAD && found === 0; k++) if (src.changedSinceRead()) found = k;
      assert.ok(found > 0, `s${i}.yaml's edit found by a poll`);
    }
    await src.read();
    assert.equal(polls(src, 2 * WATCHED_POLL_SPREAD), 0, 'the rescan took the edits in');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file added or removed is found by the next poll (the directory changed)', async () => {
  const dir = siteDir();
  try {
    const src = new DirSource(dir, { defaults: { command: ['php-cgi'] } } as never, 2000);
    await src.read();
    writeFileSync(join(dir, 'new.yaml'), 'names: [new.test]\ndocument_root: /srv/new\n');
    assert.equal(src.changedSinceRead(), true);
    assert.equal((await src.read()).sites.length, FILES + 1);
    assert.equal(src.changedSinceRead(), false);
    rmSync(join(dir, 's3.yaml'));
    assert.equal(src.changedSinceRead(), true);
    assert.equal((await src.read()).sites.length, FILES);
    assert.equal(polls(src, WATCHED_POLL_SPREAD), 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
