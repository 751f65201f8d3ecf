/**
 * examples/grafana/fcgi-pm-dashboard.json against the metrics a running daemon really
 * exports: every series a panel queries exists in the daemon's Prometheus page, with
 * every label the panel groups or filters by (Prometheus adds `instance` itself), so a
 * renamed metric or label fails here rather than as an empty panel.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemon } from '../helpers/daemon.js';
import { httpRequest } from '../helpers/http-client.js';
import { PHP_FIXTURES, REPO_ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/ports.js';
import { worldReadableDir } from '../helpers/world-readable.js';

interface Target {
  expr: string;
}

/** Each metric a PromQL expression reads, with the labels it names for it. */
function seriesOf(expr: string): Array<{ metric: string; labels: string[] }> {
  const out: Array<{ metric: string; labels: string[] }> = [];
  const grouped = [...expr.matchAll(/by \(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((s) => s.trim()));
  for (const m of expr.matchAll(/(fcgipm_[a-z_]+)(\{([^}]*)\})?/g)) {
    const filtered = m[3] === undefined ? [] : [...m[3].matchAll(/([a-z_]+)\s*(=~|!=|=|!~)/g)].map((x) => x[1]!);
    out.push({ metric: m[1]!, labels: [...new Set([...grouped, ...filtered])] });
  }
  return out;
}

test('every series the Grafana dashboard queries is exported by the daemon, with the labels it uses', { timeout: 60_000 }, async (t) => {
  const dash = JSON.parse(readFileSync(join(REPO_ROOT, 'examples/grafana/fcgi-pm-dashboard.json'), 'utf8')) as { panels: Array<{ title: string; targets: Target[] }>; templating: { list: Array<{ definition?: string }> } };
  const docroot = worldReadableDir(t, PHP_FIXTURES);
  const port = await freePort();
  const d = await startDaemon(t, {
    control_socket: 'off',
    memory_budget: '1GiB',
    listen: [{ protocol: 'http', address: `127.0.0.1:${port}`, pool: 'php', document_root: docroot, status_path: '/status' }],
    // max_requests 1: a recycle, so the recycles series (labelled by reason) exists.
    pools: { php: { command: ['php-cgi'], user: 'www-data', max_children: 2, memory_limit: '512MiB', max_requests: 1 } },
  });
  for (let i = 0; i < 2; i++) assert.equal((await httpRequest(`http://127.0.0.1:${port}/hello.php`)).status, 200);
  await d.waitForLog((l) => typeof l.msg === 'string' && /max_requests/.test(l.msg), { what: 'a recycle', timeout: 10_000 });
  const page = await httpRequest(`http://127.0.0.1:${port}/status?prometheus`);
  assert.equal(page.status, 200, page.text);
  // metric name → the label names its samples carry.
  const exported = new Map<string, Set<string>>();
  for (const line of page.text.split('\n')) {
    const m = /^([a-z_]+)(\{([^}]*)\})? /.exec(line);
    if (m === null) continue;
    const labels = m[3] === undefined ? [] : [...m[3].matchAll(/([a-z_]+)="/g)].map((x) => x[1]!);
    const set = exported.get(m[1]!) ?? new Set<string>();
    for (const l of labels) set.add(l);
    exported.set(m[1]!, set);
  }
  const exprs = [...dash.panels.flatMap((p) => p.targets.map((x) => x.expr)), ...dash.templating.list.map((v) => v.definition ?? '').filter((e) => e.includes('fcgipm_'))];
  let checked = 0;
  for (const expr of exprs) {
    for (const { metric, labels } of seriesOf(expr)) {
      const have = exported.get(metric);
      assert.ok(have !== undefined, `${metric} (in ${expr}) is not exported; the daemon exports: ${[...exported.keys()].join(', ')}`);
      for (const l of labels) if (l !== 'instance' && l !== 'le') assert.ok(have.has(l), `${metric} has no label ${l} (in ${expr}); it has ${[...have].join(', ')}`);
      checked++;
    }
  }
  assert.ok(checked >= 15, `only ${checked} series checked`);
  await d.stop();
});
