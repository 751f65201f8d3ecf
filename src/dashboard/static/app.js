// fcgi-pm dashboard page: renders the cluster from server-sent events (/api/events) and
// sends edits and reloads as JSON. No framework, no build step.
'use strict';
(() => {
  const $ = (sel) => document.querySelector(sel);
  const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  const SEP = '\u0000';
  const rings = new Map(); // "daemon\0pool" -> points
  let capacity = 450;
  let editable = [];
  let cluster;

  const size = (b) => {
    if (b === undefined || b === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return `${b.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
  };
  const age = (ms) => {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  };
  const num = (v, unit = '') => (v === undefined || v === null ? '–' : `${v}${unit}`);

  function chart(points, field, cls, label, extra) {
    const w = 300, h = 48;
    const vals = points.map((p) => p[field] ?? 0);
    const vals2 = extra ? points.map((p) => p[extra] ?? 0) : [];
    const max = Math.max(1, ...vals, ...vals2);
    // From the oldest point kept (at most the history), so a young ring fills the chart.
    const t1 = Date.now(), t0 = Math.max(t1 - capacity * intervalMs, points.length ? Math.min(points[0].t, t1 - 10 * intervalMs) : t1 - capacity * intervalMs);
    const line = (vs) => points.map((p, i) => `${(((p.t - t0) / (t1 - t0)) * w).toFixed(1)},${(h - (vs[i] / max) * (h - 2) - 1).toFixed(1)}`).join(' ');
    const last = vals.length ? vals[vals.length - 1] : 0;
    return `<div class="chart"><span class="muted">${esc(label)}</span> <b>${esc(last)}</b>${extra ? ` / <b>${esc(vals2[vals2.length - 1] ?? 0)}</b>` : ''} <span class="muted">max ${esc(max)}${points.length ? ` · since ${new Date(points[0].t).toLocaleTimeString()}` : ''}</span>
      <svg class="chart-${cls}" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" data-last="${esc(last)}" data-max="${esc(Math.max(...vals, 0))}" data-nonzero="${vals.filter((v) => v > 0).length}" role="img" aria-label="${esc(label)} over the last minutes">
      <polyline points="${line(vals)}"/>${extra ? `<polyline class="p99" points="${line(vals2)}"/>` : ''}</svg></div>`;
  }

  const POOL_ACTIONS = [
    ['restart', 'Restart workers', 'fresh workers all at once; the old ones finish their requests'],
    ['rolling', 'Rolling restart', 'one worker at a time, the next once its replacement is ready'],
    ['drain', 'Drain', 'retire the workers after their requests; new requests start workers on demand (static: a rolling restart)'],
  ];

  // The pool's actions on this daemon, and on every daemon that has the pool when there are several.
  function poolActions(d, p) {
    const holders = cluster.daemons.filter((x) => (x.snapshot?.pools ?? []).some((q) => q.name === p.name && q.kind === 'spawned')).map((x) => x.id);
    const row = (targets, suffix) => POOL_ACTIONS.map(([verb, label, title]) =>
      `<button type="button" class="pool-action${verb === 'restart' ? ' restart' : ''}" data-verb="${verb}" data-targets="${esc(JSON.stringify(targets))}" data-restart-pool="${esc(p.name)}" title="${esc(title)}">${label}${suffix}</button>`).join('');
    return `<span class="actions">${row([d.id], '')}${holders.length > 1 ? `<span class="actions-all">${row(holders, ` (all ${holders.length})`)}</span>` : ''}</span>`;
  }

  function poolView(d, p) {
    const pts = rings.get(d.id + SEP + p.name) ?? [];
    const last = pts[pts.length - 1] ?? {};
    const q = p.queue;
    const waits = q.waits && q.waits.count ? `${Math.round(q.waits.totalMs / q.waits.count)} ms avg, ${Math.round(q.waits.maxMs)} max` : '–';
    const r = p.rejected;
    const st = p.outcomes ? p.outcomes.status : {};
    const mem = p.memory ?? {};
    const recycles = Object.entries(p.recycles).map(([k, v]) => `${k} ${v}`).join(', ') || '0';
    // Until the governor measured the pool, the workers' own figures (RSS) add up instead.
    const memTotal = mem.total || p.workers.reduce((n, w) => n + (w.memory ?? 0), 0) || undefined;
    const limitPct = mem.limit ? Math.min(100, Math.round(((memTotal ?? 0) / mem.limit) * 100)) : 0;
    const now = d.snapshot.daemon.now;
    const workers = p.workers.map((w) => `<tr data-pid="${w.pid}"><td>${w.pid}</td><td>${esc(w.state)}${w.retiring ? ` (${esc(w.retiring)})` : ''}</td><td>${w.requests}</td><td>${age(now - w.startedAt)}</td><td>${size(w.memory)}${w.measure && w.measure !== 'pss' ? ` ${esc(w.measure)}` : ''}</td><td>${esc(w.request ? `${w.request.method} ${w.request.uri}` : '')}</td></tr>`).join('');
    return `<div class="pool" data-pool="${esc(p.name)}" data-daemon-id="${esc(d.id)}">
      <div class="pool-head"><h3>${esc(p.name)}</h3><span class="pill ${p.state === 'running' ? '' : 'warn'}">${esc(p.state)}</span>
        <span class="muted">${esc(p.kind)} · pm ${esc(p.pm)}${p.maxChildren ? ` · max_children <b class="max-children">${p.maxChildren}</b>` : ''} · up ${age(now - p.startedAt)}${p.generations > 1 ? ` · ${p.generations - 1} generation(s) draining` : ''}</span>
        ${p.kind === 'spawned' ? poolActions(d, p) : ''}</div>
      <div class="figures">
        <div><span class="muted">req/s</span><b class="rps">${num(last.rps ?? 0)}</b></div>
        <div><span class="muted">latency p50 / p99</span><b>${num(last.p50, ' ms')} / ${num(last.p99, ' ms')}</b></div>
        <div><span class="muted">workers busy / idle / starting</span><b><span class="busy">${p.processes.busy}</span> / <span class="idle">${p.processes.idle}</span> / ${p.processes.spawning}</b></div>
        <div><span class="muted">queue (limit ${q.limit})</span><b class="queue">${q.length}</b><span class="muted">oldest ${q.oldestWaitMs} ms; waits ${esc(waits)}</span></div>
        <div><span class="muted">responses 2xx / 3xx / 4xx / 5xx</span><b>${st['2xx'] ?? 0} / ${st['3xx'] ?? 0} / ${st['4xx'] ?? 0} / ${st['5xx'] ?? 0}</b></div>
        <div><span class="muted">503: queue full / timeout / failing / stopping</span><b>${r.queueFull} / ${r.queueTimeout} / ${r.failing} / ${r.shuttingDown}</b></div>
        <div><span class="muted">crashes · recycles</span><b>${p.crashes}</b><span class="muted">${esc(recycles)}</span></div>
        <div><span class="muted">memory${mem.limit ? ` of ${size(mem.limit)}` : ''}</span><b>${size(memTotal)}</b>${mem.limit ? `<div class="bar"><i style="width:${limitPct}%"></i></div>` : ''}</div>
        <div><span class="muted">requests</span><b>${p.completed}</b><span class="muted">${p.active} active</span></div>
      </div>
      <div class="charts">${chart(pts, 'rps', 'rps', 'req/s')}${chart(pts, 'busy', 'busy', 'busy workers')}${chart(pts, 'p50', 'latency', 'p50 / p99 ms', 'p99')}${chart(pts, 'queue', 'queue', 'queued')}</div>
      <details${p.workers.length <= 8 ? ' open' : ''}><summary>${p.workers.length} worker(s)</summary>
        <table class="workers"><thead><tr><th>pid</th><th>state</th><th>requests</th><th>age</th><th>PSS</th><th>request</th></tr></thead><tbody>${workers}</tbody></table></details>
    </div>`;
  }

  function daemonView(d) {
    if (!d.up) {
      return `<article class="daemon is-down" data-daemon="${esc(d.id)}" data-up="false"><div class="daemon-head"><h2>${esc(d.label)}</h2><span class="pill down">down</span>
        <span class="reason">${esc(d.reason)}</span></div></article>`;
    }
    const s = d.snapshot;
    const m = s.memory;
    const host = m && m.budget ? ` · host budget ${size(m.used)} of ${size(m.budget)}` : '';
    return `<article class="daemon" data-daemon="${esc(d.id)}" data-up="true">
      <div class="daemon-head"><h2>${esc(d.label)}</h2><span class="pill">${esc(s.daemon.state)}</span>
        <span class="muted">${esc(d.id === 'self' ? 'this daemon' : d.id)} · v${esc(s.daemon.version)} · up ${age(s.daemon.now - s.daemon.startedAt)} · reloads ${s.daemon.reloads.ok} ok, ${s.daemon.reloads.failed} failed${host}</span>
        <button type="button" class="reload" data-target="${esc(d.id)}">Reload</button></div>
      ${s.pools.map((p) => poolView(d, p)).join('')}</article>`;
  }

  // Brings `el` to the new markup in place: nodes that stay keep their identity, so a
  // button being clicked or a <details> the user opened survives the next tick.
  function morph(el, next) {
    if (el.nodeType !== next.nodeType || el.nodeName !== next.nodeName) return void el.replaceWith(next);
    if (el.nodeType === 3) {
      if (el.nodeValue !== next.nodeValue) el.nodeValue = next.nodeValue;
      return;
    }
    if (el.nodeType !== 1) return;
    for (const a of [...el.attributes]) if (!next.hasAttribute(a.name) && a.name !== 'open') el.removeAttribute(a.name);
    for (const a of next.attributes) if (el.getAttribute(a.name) !== a.value && !(a.name === 'open' && el.fcgipmSeen)) el.setAttribute(a.name, a.value);
    if (el.nodeName === 'DETAILS') el.fcgipmSeen = true;
    morphChildren(el, next);
  }

  function morphChildren(el, next) {
    const want = [...next.childNodes];
    while (el.childNodes.length > want.length) el.lastChild.remove();
    want.forEach((n, i) => {
      const cur = el.childNodes[i];
      if (cur === undefined) el.appendChild(n);
      else morph(cur, n);
    });
  }

  function renderCluster() {
    if (!cluster) return;
    const t = document.createElement('template');
    t.innerHTML = cluster.daemons.map(daemonView).join('');
    morphChildren($('#daemons'), t.content);
    $('#updated').textContent = `updated ${new Date(cluster.at).toLocaleTimeString()}`;
    renderEditChoices();
  }

  function renderEditChoices() {
    const sel = $('#edit-pool');
    const names = Object.keys(cluster.pools).sort();
    const cur = sel.value;
    if (sel.dataset.names !== names.join(',')) {
      sel.innerHTML = names.map((n) => `<option>${esc(n)}</option>`).join('');
      sel.dataset.names = names.join(',');
      if (names.includes(cur)) sel.value = cur;
    }
    const ids = cluster.pools[sel.value] ?? [];
    const box = $('#edit-targets');
    if (box.dataset.ids !== ids.join(',')) {
      const checked = new Set([...box.querySelectorAll('input:checked')].map((i) => i.value));
      box.innerHTML = '<legend>On daemons</legend>' + ids.map((id) => {
        const d = cluster.daemons.find((x) => x.id === id);
        return `<label><input type="checkbox" name="target" value="${esc(id)}"${checked.size === 0 || checked.has(id) ? ' checked' : ''}> ${esc(d ? d.label : id)}</label>`;
      }).join('');
      box.dataset.ids = ids.join(',');
    }
    const fields = $('#edit-fields');
    if (fields.dataset.keys !== editable.join(',')) {
      fields.innerHTML = editable.map((k) => `<label>${esc(k)} <input name="${esc(k)}" data-key="${esc(k)}" autocomplete="off"></label>`).join('');
      fields.dataset.keys = editable.join(',');
    }
  }

  function renderWarnings(list) {
    const ol = $('#warnings');
    if (!list.length) return void (ol.innerHTML = '<li class="muted">none</li>');
    const label = (id) => (cluster?.daemons.find((d) => d.id === id)?.label ?? id).replace(/ \(pid \d+\)$/, '');
    ol.innerHTML = list.map((w) => `<li data-warning-daemon="${esc(w.daemon)}"><span class="muted">${new Date(w.last).toLocaleTimeString()} ${esc(label(w.daemon))}</span><br><code>${esc(w.code)}</code>${w.pool ? ` [${esc(w.pool)}]` : ''} ${esc(w.msg)}${w.count > 1 ? ` <b>×${w.count}</b>` : ''}</li>`).join('');
  }

  // mode: preview | edit | reload | restart | rolling | drain
  function renderResults(out, mode) {
    const preview = mode === 'preview';
    const done = { edit: 'written and reloaded', reload: 'reloaded', restart: 'workers replaced' }[mode] ?? 'done';
    // A rolling restart's or drain's report: what it did on that daemon.
    const did = (rep) => (rep?.action === 'restart' ? `${rep.started.length} worker(s) replaced one by one` : rep?.action === 'drain' ? `${rep.retired.length} worker(s) retired` : done);
    const html = out.results.map((r) => {
      const d = cluster?.daemons.find((x) => x.id === r.id);
      const diff = (r.diff ?? []).map((l) => `<span class="${l.op === '+' ? 'add' : l.op === '-' ? 'del' : ''}">${esc(l.op)} ${esc(l.text)}</span>`).join('\n');
      const probs = [...(r.problems ?? []), ...(r.reload?.problems ?? [])];
      const status = r.error ? esc(r.error) : r.reload ? (r.reload.ok ? did(r.reload.report) : `${mode === 'rolling' || mode === 'drain' ? mode : 'reload'} failed: ${esc(r.reload.error)}`) : r.ok ? (preview ? 'valid' : 'valid; not written') : 'invalid';
      return `<div class="result ${r.ok ? '' : 'bad'}" data-result="${esc(r.id)}" data-ok="${r.ok}"><b>${esc(d ? d.label : r.id)}</b>: <span class="status">${status}</span>
        ${probs.length ? `<ul class="problems">${probs.map((p) => `<li>${esc(p)}</li>`).join('')}</ul>` : ''}${diff ? `<pre class="diff">${diff}</pre>` : ''}</div>`;
    }).join('');
    const head = out.applied ? '<p>Applied.</p>' : preview ? '<p>Preview: nothing written.</p>' : mode === 'edit' ? '<p class="reason">Nothing was changed on any daemon.</p>' : '<p class="reason">Failed.</p>';
    $('#edit-result').innerHTML = head + html;
  }

  async function post(path, body) {
    const res = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' });
    const v = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
    if (!res.ok) throw new Error(v.error ?? `HTTP ${res.status}`);
    return v;
  }

  function editBody(dryRun) {
    const settings = {};
    for (const i of document.querySelectorAll('#edit-fields input')) {
      const v = i.value.trim();
      if (v === '-') settings[i.dataset.key] = null;
      else if (v !== '') settings[i.dataset.key] = v;
    }
    const targets = [...document.querySelectorAll('#edit-targets input:checked')].map((i) => i.value);
    return { pool: $('#edit-pool').value, targets, settings, dryRun };
  }

  async function edit(dryRun) {
    $('#edit-result').innerHTML = '<p class="muted">working…</p>';
    try {
      renderResults(await post('api/edit', editBody(dryRun)), dryRun ? 'preview' : 'edit');
    } catch (err) {
      $('#edit-result').innerHTML = `<p class="reason">${esc(err.message)}</p>`;
    }
  }

  $('#edit-form').addEventListener('submit', (e) => { e.preventDefault(); void edit(false); });
  $('#edit-preview').addEventListener('click', () => void edit(true));
  $('#edit-pool').addEventListener('change', () => cluster && renderEditChoices());
  $('#daemons').addEventListener('click', async (e) => {
    const b = e.target.closest('button.reload, button.pool-action');
    if (!b) return;
    b.disabled = true;
    $('#edit-result').innerHTML = '<p class="muted">working…</p>';
    try {
      const verb = b.dataset.verb ?? 'reload';
      const body = verb === 'reload' ? { targets: [b.dataset.target] } : { targets: JSON.parse(b.dataset.targets), pool: b.dataset.restartPool, rolling: verb === 'rolling' };
      const out = await post(verb === 'reload' ? 'api/reload' : verb === 'drain' ? 'api/drain' : 'api/restart', body);
      renderResults({ applied: out.results.every((r) => r.ok), results: out.results }, verb);
    } catch (err) {
      $('#edit-result').innerHTML = `<p class="reason">${esc(err.message)}</p>`;
    }
  });

  let intervalMs = 2000;
  const es = new EventSource('api/events');
  es.addEventListener('open', () => { $('#conn').textContent = 'live'; $('#conn').className = 'pill'; });
  es.addEventListener('error', () => { $('#conn').textContent = 'reconnecting…'; $('#conn').className = 'pill down'; });
  es.addEventListener('history', (e) => {
    const h = JSON.parse(e.data);
    intervalMs = h.intervalMs;
    capacity = Math.max(1, Math.ceil(h.historyMs / h.intervalMs));
    editable = h.editable;
    rings.clear();
    for (const [k, pts] of Object.entries(h.rings)) rings.set(k, pts);
  });
  es.addEventListener('tick', (e) => {
    const t = JSON.parse(e.data);
    for (const [k, p] of Object.entries(t.points)) {
      const r = rings.get(k) ?? [];
      if (!r.length || r[r.length - 1].t !== p.t) r.push(p);
      if (r.length > capacity) r.splice(0, r.length - capacity);
      rings.set(k, r);
    }
    cluster = t.cluster;
    renderCluster();
  });
  es.addEventListener('warnings', (e) => renderWarnings(JSON.parse(e.data)));
})();
