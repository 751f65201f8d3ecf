/**
 * Preloaded into a daemon by bench/path-counts.ts (`node --import`): on the first SIGWINCH
 * it starts counting JavaScript calls (V8's precise coverage with call counts) or sampling
 * allocations (the sampling heap profiler, objects the GC took included); on the second it
 * writes what it saw to PATH_COUNTS_OUT and then PATH_COUNTS_OUT.done. Counts, not times:
 * a loaded machine does not move them.
 */
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';

interface Coverage {
  result: Array<{ url: string; functions: Array<{ functionName: string; ranges: Array<{ startOffset: number; count: number }> }> }>;
}
interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}

const out = process.env.PATH_COUNTS_OUT ?? '/tmp/path-counts.json';
const mode = process.env.PATH_COUNTS_MODE === 'alloc' ? 'alloc' : 'calls';
const session = new Session();
session.connect();
const post = <T>(method: string, params: object = {}): Promise<T> =>
  new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r as T))));
const where = (url: string): string => url.replace(/^.*\/dist\//, '').replace(/^file:\/\//, '');

let on = false;
process.on('SIGWINCH', () => void (on ? stop() : start()));

async function start(): Promise<void> {
  on = true;
  if (mode === 'calls') {
    await post('Profiler.enable');
    await post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    await post('Profiler.takePreciseCoverage'); // counts from now on
  } else {
    await post('HeapProfiler.startSampling', { samplingInterval: 64, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  writeFileSync(`${out}.started`, '');
}

async function stop(): Promise<void> {
  on = false;
  const counts: Record<string, number> = {};
  if (mode === 'calls') {
    const { result } = await post<Coverage>('Profiler.takePreciseCoverage');
    await post('Profiler.stopPreciseCoverage');
    for (const script of result) {
      for (const f of script.functions) {
        const r = f.ranges[0]!;
        if (r.count === 0) continue;
        const key = `${f.functionName || '(anonymous)'} ${where(script.url)}:${r.startOffset}`;
        counts[key] = (counts[key] ?? 0) + r.count;
      }
    }
  } else {
    const { profile } = await post<{ profile: { head: SamplingNode } }>('HeapProfiler.stopSampling');
    const walk = (node: SamplingNode, caller: string): void => {
      const cf = node.callFrame;
      const here = `${cf.functionName || '(anonymous)'} ${where(cf.url)}:${cf.lineNumber + 1}`;
      if (node.selfSize > 0) {
        const key = caller === '' ? here : `${here} < ${caller}`;
        counts[key] = (counts[key] ?? 0) + node.selfSize;
      }
      for (const c of node.children) walk(c, here);
    };
    walk(profile.head, '');
  }
  writeFileSync(out, JSON.stringify(counts));
  writeFileSync(`${out}.done`, '');
}
