/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): the functions with the most
 * self time and the most inclusive time, grouped by function and file, as a table.
 *
 *   node dist/bench/cpuprofile-top.js PROFILE.cpuprofile [--top 25] [--json] [--callers NAME]
 *
 * Self: samples where the function itself was running. Inclusive: samples where it was
 * anywhere on the stack (counted once per sample even when recursive).
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface FunctionCost {
  name: string;
  where: string;
  selfMs: number;
  selfPct: number;
  totalMs: number;
  totalPct: number;
}

const REPO = fileURLToPath(new URL('../../', import.meta.url));

function where(cf: CallFrame): string {
  if (cf.url === '') return '';
  let u = cf.url.startsWith('file://') ? fileURLToPath(cf.url) : cf.url;
  if (u.startsWith(REPO)) u = relative(REPO, u);
  return `${u}:${cf.lineNumber + 1}`;
}

/**
 * Costs per function (percentages of busy time: idle left out); `fromUs`..`toUs` keeps the
 * samples of that window only (the profile's clock: CLOCK_MONOTONIC µs, process.hrtime's).
 */
export function summarise(p: CpuProfile, fromUs = -Infinity, toUs = Infinity): { costs: FunctionCost[]; busyMs: number; totalMs: number; idleMs: number; gcMs: number } {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const key = (n: ProfileNode): string => `${n.callFrame.functionName || '(anonymous)'}\t${where(n.callFrame)}`;
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let idle = 0;
  let gc = 0;
  let all = 0;
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    if (at < fromUs || at > toUs) continue;
    const dt = (p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0) / 1000;
    const n = byId.get(p.samples[i]!)!;
    all += dt;
    const name = n.callFrame.functionName;
    if (name === '(idle)') {
      idle += dt;
      continue;
    }
    if (name === '(garbage collector)') gc += dt;
    const k = key(n);
    self.set(k, (self.get(k) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const kk = key(byId.get(id)!);
      if (seen.has(kk)) continue;
      seen.add(kk);
      total.set(kk, (total.get(kk) ?? 0) + dt);
    }
  }
  const busy = all - idle;
  const costs: FunctionCost[] = [];
  for (const [k, t] of total) {
    const [name, w] = k.split('\t') as [string, string];
    if (name === '(root)') continue;
    const s = self.get(k) ?? 0;
    costs.push({ name, where: w, selfMs: s, selfPct: (s / busy) * 100, totalMs: t, totalPct: (t / busy) * 100 });
  }
  return { costs, busyMs: busy, totalMs: all, idleMs: idle, gcMs: gc };
}

/** Where the self time of functions called `name` comes from: their nearest fcgi-pm (dist/src) caller. */
export function callersOf(p: CpuProfile, name: string): Array<{ caller: string; ms: number }> {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const out = new Map<string, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i]!)!;
    if (n.callFrame.functionName !== name) continue;
    const dt = (p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0) / 1000;
    let caller = '(not under fcgi-pm code)';
    for (let id = parent.get(n.id); id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      const w = where(f);
      if (w.startsWith('dist/src/')) {
        caller = `${f.functionName || '(anonymous)'}  ${w}`;
        break;
      }
    }
    out.set(caller, (out.get(caller) ?? 0) + dt);
  }
  return [...out].map(([caller, ms]) => ({ caller, ms })).sort((a, b) => b.ms - a.ms);
}

function main(): void {
  const file = process.argv[2];
  if (file === undefined) {
    process.stderr.write('usage: cpuprofile-top PROFILE.cpuprofile [--top N] [--json]\n');
    process.exit(2);
  }
  const ti = process.argv.indexOf('--top');
  const top = ti > 0 ? Number(process.argv[ti + 1]) : 25;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const ci = process.argv.indexOf('--callers');
  if (ci > 0) {
    for (const c of callersOf(profile, process.argv[ci + 1]!)) process.stdout.write(`${c.ms.toFixed(1).padStart(9)} ms  ${c.caller}\n`);
    return;
  }
  const s = summarise(profile);
  const bySelf = [...s.costs].sort((a, b) => b.selfMs - a.selfMs).slice(0, top);
  const byTotal = [...s.costs].filter((c) => c.where.startsWith('dist/src/')).sort((a, b) => b.totalMs - a.totalMs).slice(0, top);
  if (process.argv.includes('--json')) {
    process.stdout.write(`${JSON.stringify({ busyMs: s.busyMs, idleMs: s.idleMs, gcMs: s.gcMs, bySelf, byTotal }, null, 2)}\n`);
    return;
  }
  const out: string[] = [];
  out.push(`busy ${s.busyMs.toFixed(0)} ms of ${s.totalMs.toFixed(0)} ms sampled (idle ${s.idleMs.toFixed(0)} ms, GC ${s.gcMs.toFixed(0)} ms); percentages are of busy time`);
  out.push('', 'Self time:', '  self%  total%  function  (file:line)');
  for (const c of bySelf) out.push(`  ${c.selfPct.toFixed(1).padStart(5)}  ${c.totalPct.toFixed(1).padStart(6)}  ${c.name}  ${c.where}`);
  out.push('', "Inclusive time, fcgi-pm's own functions:", '  total%  self%  function  (file:line)');
  for (const c of byTotal) out.push(`  ${c.totalPct.toFixed(1).padStart(6)}  ${c.selfPct.toFixed(1).padStart(5)}  ${c.name}  ${c.where}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href) main();
