/**
 * A line diff of two texts (pure), unified style with a few lines of context: what the
 * page shows before a change to a config file is written.
 */

export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
  /** 1-based line in the old file (' ' and '-') or the new one ('+'). */
  line: number;
}

/** Changed lines with `context` unchanged lines around each change; '…' rows mark gaps. */
export function lineDiff(before: string, after: string, context = 2): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  // Trim the common head and tail, then LCS on the middle (config files are small).
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  const n = am.length;
  const m = bm.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i]![j] = am[i] === bm[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const all: DiffLine[] = a.slice(0, head).map((text, i) => ({ op: ' ', text, line: i + 1 }));
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && am[i] === bm[j]) {
      all.push({ op: ' ', text: am[i]!, line: head + i + 1 });
      i++;
      j++;
    } else if (i < n && (j >= m || lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) {
      all.push({ op: '-', text: am[i]!, line: head + i + 1 });
      i++;
    } else {
      all.push({ op: '+', text: bm[j]!, line: head + j + 1 });
      j++;
    }
  }
  for (let k = a.length - tail; k < a.length; k++) all.push({ op: ' ', text: a[k]!, line: k + 1 });
  const keep = all.map((d) => d.op !== ' ');
  const near = all.map((_, k) => keep.slice(Math.max(0, k - context), k + context + 1).some(Boolean));
  const out: DiffLine[] = [];
  all.forEach((d, k) => {
    if (near[k]) out.push(d);
    else if (out[out.length - 1]?.text !== '…') out.push({ op: ' ', text: '…', line: 0 });
  });
  return out;
}
