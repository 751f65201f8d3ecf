/**
 * The import rules ARCHITECTURE.md states, checked on the source: folders import only
 * those to their left on its arrow line (and the ground floor: src/errors.ts,
 * src/version.ts, src/util/), the ground floor imports nothing above it, src/bench
 * imports protocol only, the rooms of src/pool (spawned/, external/, direct/) do not
 * reach into each other, no file of src/ is part of an import circle, and only the
 * dispatcher imports a spawned pool's seats.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { REPO_ROOT } from '../helpers/paths.js';

const SRC = join(REPO_ROOT, 'src');
const GROUND = new Set(['errors.ts', 'version.ts', 'util']);

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sourceFiles(p, out);
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Relative imports of each file (static, type-only, dynamic and re-exports), as .ts paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const f of sourceFiles(SRC)) {
    const text = readFileSync(f, 'utf8');
    const deps: string[] = [];
    for (const m of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.\.?\/[^'"]+?)\.js['"]/g)) deps.push(resolve(dirname(f), `${m[1]}.ts`));
    graph.set(f, deps);
  }
  return graph;
}

/** The first path segment under src/: a folder, or a file of src/ itself. */
const room = (f: string): string => relative(SRC, f).split('/')[0]!;
const rel = (f: string): string => relative(SRC, f);

/** Floors from ARCHITECTURE.md's arrow line: each folder may import those before it. */
function floors(): Map<string, number> {
  const doc = readFileSync(join(REPO_ROOT, 'ARCHITECTURE.md'), 'utf8');
  const line = doc.split('\n').find((l) => l.startsWith('protocol ←'));
  assert.ok(line !== undefined, 'ARCHITECTURE.md has its arrow line');
  const order = line.split(/[←,]/).map((s) => s.trim()).filter((s) => s !== '');
  const rank = new Map(order.map((name, i) => [name, i + 1]));
  for (const g of GROUND) rank.set(g, 0);
  // Its second line, "bench ← cli": bench drives fcgi-pm from outside and imports protocol only.
  assert.match(doc, /\n\s+bench ← cli\n/);
  rank.set('bench', rank.get('protocol')! + 0.5);
  return rank;
}

test('ARCHITECTURE.md names every folder of src/ on its arrow line', () => {
  const rank = floors();
  const rooms = readdirSync(SRC).filter((n) => !rank.has(n));
  assert.deepEqual(rooms, []);
});

test('imports point one way: nothing runs back up the floors', () => {
  const rank = floors();
  const wrong: string[] = [];
  for (const [f, deps] of importGraph()) {
    const from = room(f);
    for (const d of deps) {
      const to = room(d);
      if (to === from) continue;
      const ok = to === 'bench' ? from === 'cli' : rank.get(to)! < rank.get(from)!;
      if (!ok) wrong.push(`${rel(f)} → ${rel(d)}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("src/pool's rooms (spawned/, external/, direct/) import only the pool's shared files and workers/, not each other; workers/ imports no room", () => {
  const rooms = ['spawned', 'external', 'direct'];
  const roomOf = (f: string): string | undefined => {
    const parts = rel(f).split('/');
    return parts[0] === 'pool' && parts.length > 2 ? parts[1] : undefined;
  };
  const wrong: string[] = [];
  for (const [f, deps] of importGraph()) {
    const from = roomOf(f);
    for (const d of deps) {
      const to = roomOf(d);
      if (to !== undefined && from !== undefined && to !== from && rooms.includes(to)) wrong.push(`${rel(f)} → ${rel(d)}`);
      // The shared files below the rooms (pool-base, queue, types...) know none of them.
      if (to !== undefined && from === undefined && room(f) === 'pool' && !rel(f).endsWith('index.ts')) wrong.push(`${rel(f)} → ${rel(d)}`);
    }
  }
  assert.deepEqual(wrong, []);
});

/** Tarjan's strongly connected components of the import graph: each of more than one file is a circle. */
function importCircles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const circles: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(rel(w));
      } while (w !== v);
      if (c.length > 1) circles.push(c.sort());
    }
  };
  for (const f of graph.keys()) if (!idx.has(f)) visit(f);
  return circles;
}

test('the circle finder finds a circle, and only in files that import each other', () => {
  const f = (name: string): string => join(SRC, name);
  const graph = new Map([
    [f('a.ts'), [f('b.ts')]],
    [f('b.ts'), [f('c.ts')]],
    [f('c.ts'), [f('a.ts'), f('d.ts')]],
    [f('d.ts'), [f('e.ts')]],
    [f('e.ts'), []],
  ]);
  assert.deepEqual(importCircles(graph), [['a.ts', 'b.ts', 'c.ts']]);
  graph.set(f('c.ts'), [f('d.ts')]);
  assert.deepEqual(importCircles(graph), []);
});

test('no import circle in src/', () => {
  const graph = importGraph();
  assert.ok(graph.size > 100, `${graph.size} files read`);
  assert.deepEqual(importCircles(graph).map((c) => c.join(' ↔ ')), []);
});

test("a spawned pool's seats (spawned/seats.ts) are the dispatcher's alone: others read them as slot.ts's SeatView", () => {
  const seats = join(SRC, 'pool/spawned/seats.ts');
  const importers: string[] = [];
  for (const [f, deps] of importGraph()) if (deps.includes(seats)) importers.push(rel(f));
  assert.deepEqual(importers, ['pool/spawned/dispatcher.ts']);
});
