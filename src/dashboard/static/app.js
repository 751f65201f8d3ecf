// fcgi-pm dashboard page: a table of the cluster's active pools (vhosts sites with no pool
// now are a count, listed when searched for or asked), fed by server-sent events
// (/api/events: each tick sends only the rows that changed), searchable and sortable; a
// row opened shows that pool's figures, charts, workers, actions and edit form, fetched on
// demand (/api/pool). At most three screens of rows: a search narrows the rest. No
// framework, no build step.
'use strict';
(() => {
  const $ = (sel, el = document) => el.querySelector(sel);
  const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
  // Joins daemon id and pool in a row key; HTML turns a NUL in an attribute into U+FFFD.
  const SEP = '\u241f';
  /** Rows drawn at most (about two screens); a search narrows the rest. */
  const MAX_ROWS = 100;
  /** An open row's details are fetched again at most this often. */
  const DETAILS_MS = 5000;
  const NUMERIC = new Set(['busy', 'idle', 'max', 'queue', 'rps', 'p99', 'mem', 'errors', 'refused']);

  let editable = [];
  let daemons = [];
  let rows = [];
  /** Row key → row, as the ticks left it (each tick sends the rows that changed and the keys gone). */
  const rowByKey = new Map();
  /** daemon id → [[site id, names]] */
  let sites = new Map();
  let warnings = [];
  let sort = { key: 'rps', dir: -1 };
  const open = new Map(); // key → { tr, fetchedAt, form }

  const size = (b) => {
    if (b === undefined || b === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return `${b.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
  };
  const ms = (v) => (v === undefined || v === null ? '–' : v >= 1000 ? `≤${v / 1000} s` : `≤${v} ms`);
  const age = (t) => {
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  };
  const keyOf = (r) => r.d + SEP + r.pool;

  // ---- the table ----------------------------------------------------------------------

  /** Active pools, then the defined sites that have no pool now: when asked, or searched for. */
  function allRows(q) {
    const out = rows.slice();
    if ($('#show-idle').checked || q !== '') {
      const active = new Set(rows.map(keyOf));
      for (const [d, list] of sites) for (const [id, names] of list) if (!active.has(d + SEP + id)) out.push({ d, pool: id, names, state: 'idle', idleSite: true });
    }
    const names = new Map();
    for (const [d, list] of sites) for (const [id, n] of list) names.set(d + SEP + id, n);
    // Rows live from tick to tick (only changed ones are sent): their names follow the latest site list.
    for (const r of out) r.names = names.get(keyOf(r)) ?? '';
    return out;
  }

  function value(r, k) {
    if (k === 'errors') return (r.e4 ?? 0) + (r.e5 ?? 0);
    const v = r[k];
    if (NUMERIC.has(k)) return v === undefined || v === null ? -1 : v;
    return String(v ?? '');
  }

  function matches(r, q) {
    if (q === '') return true;
    return r.pool.toLowerCase().includes(q) || r.d.toLowerCase().includes(q) || r.names.toLowerCase().includes(q);
  }

  /** The cells of a row; the row element itself is kept from tick to tick (a click on it is never lost to a redraw). */
  function cellsHtml(r) {
    const dn = daemons.find((x) => x.id === r.d);
    const blank = r.idleSite || r.gone;
    const state = r.gone ? '<span class="muted">gone</span>' : r.idleSite ? '<span class="muted">idle (no pool)</span>' : `<span class="pill ${r.state === 'running' ? '' : 'warn'}">${esc(r.state)}</span>`;
    const n = (v) => (blank ? '' : esc(v ?? '–'));
    return `<td title="${esc(r.names || r.pool)}"><b>${esc(r.pool)}</b>${r.names ? ` <span class="muted">${esc(r.names.length > 60 ? r.names.slice(0, 60) + '…' : r.names)}</span>` : ''}</td>
      <td class="muted" title="${esc(dn ? dn.label : r.d)}">${esc(dn ? dn.label : r.d)}</td><td>${state}</td>
      <td class="num busy">${n(r.busy)}</td><td class="num">${n(r.idle)}</td><td class="num">${n(r.max)}</td>
      <td class="num">${blank ? '' : `${r.queue}/${r.limit}`}</td><td class="num rps">${blank ? '' : esc((r.rps ?? 0).toFixed(1))}</td>
      <td class="num">${blank ? '' : ms(r.p99)}</td><td class="num">${blank ? '' : size(r.mem)}</td>
      <td class="num${(r.e5 ?? 0) > 0 ? ' bad' : ''}">${blank ? '' : `${r.e4} / ${r.e5}`}</td><td class="num">${n(r.refused)}</td>`;
  }

  const rowEls = new Map(); // key → { tr, html, r }
  /** Row keys in the order drawn last. */
  let drawn = [];

  /**
   * Runs a redraw, then scrolls by as much as it moved what the user works on: the focused
   * field or row in the table (else its row, when the redraw replaced it), else the first
   * open row. Whatever changed above (the header, rows, figures), the pointer stays on it.
   */
  function steady(redraw) {
    // Nothing open: the table re-sorts freely and nothing needs to stay put.
    if (open.size === 0) return void redraw();
    const f = document.activeElement;
    const focused = f && $('#pools tbody').contains(f) ? [f, f.closest('tr')] : [];
    const marks = [...focused, ...[...open.values()].map((o) => o.tr)].filter((e) => e && e.isConnected).map((e) => [e, e.getBoundingClientRect().top]);
    redraw();
    const kept = marks.find(([e]) => e.isConnected);
    if (kept === undefined) return;
    const moved = kept[0].getBoundingClientRect().top - kept[1];
    if (moved !== 0) window.scrollBy(0, moved);
  }

  /**
   * Draws the table. While a row is open the order is held: values change in place, new
   * rows come at the end and a row that left stays, marked gone; rows move only when
   * `reorder` (the user sorted, searched, or nothing is open). A row that changed places
   * on a tick would take the click meant for its form.
   */
  function renderTable(reorder = open.size === 0) {
    const q = $('#search').value.trim().toLowerCase();
    const everything = allRows(q);
    const list = everything.filter((r) => matches(r, q));
    const { key, dir } = sort;
    list.sort((a, b) => {
      const x = value(a, key), y = value(b, key);
      const c = typeof x === 'number' ? x - y : x.localeCompare(y);
      return c * dir || a.pool.localeCompare(b.pool);
    });
    let shown;
    if (reorder) {
      shown = list.slice(0, MAX_ROWS);
      // An open row stays on the page when it sorts past the limit (the form being edited with it).
      for (const r of list.slice(MAX_ROWS)) if (open.has(keyOf(r))) shown.push(r);
    } else {
      const now = new Map(list.map((r) => [keyOf(r), r]));
      shown = drawn.map((k) => now.get(k) ?? { ...rowEls.get(k).r, gone: true });
      const held = new Set(drawn);
      for (const r of list) if (shown.length < MAX_ROWS && !held.has(keyOf(r))) shown.push(r);
    }
    drawn = shown.map(keyOf);
    const tbody = $('#pools tbody');
    const want = new Set();
    let prev = null;
    const place = (el) => {
      const at = prev ? prev.nextSibling : tbody.firstChild;
      if (at !== el) tbody.insertBefore(el, at);
      prev = el;
    };
    for (const r of shown) {
      const k = keyOf(r);
      want.add(k);
      let e = rowEls.get(k);
      if (!e) {
        const tr = document.createElement('tr');
        tr.dataset.key = k;
        tr.dataset.pool = r.pool;
        tr.dataset.daemon = r.d;
        tr.tabIndex = 0;
        e = { tr, html: '', r };
        rowEls.set(k, e);
      }
      e.r = r;
      const html = cellsHtml(r);
      if (e.html !== html) {
        e.tr.innerHTML = html;
        e.html = html;
      }
      e.tr.className = `row${open.has(k) ? ' open' : ''}${r.idleSite ? ' idle-site' : ''}`;
      e.tr.setAttribute('aria-expanded', String(open.has(k)));
      place(e.tr);
      // An open row keeps its details element (and what is typed in its form).
      const o = open.get(k);
      if (o) place(o.tr);
    }
    for (const [k, e] of rowEls) if (!want.has(k)) {
      e.tr.remove();
      rowEls.delete(k);
    }
    while (prev ? prev.nextSibling : tbody.firstChild) (prev ? prev.nextSibling : tbody.firstChild).remove();
    const active = new Set(rows.map(keyOf));
    let idleSites = 0;
    for (const [d, list] of sites) for (const [id] of list) if (!active.has(d + SEP + id)) idleSites++;
    const hidden = everything.some((r) => r.idleSite) ? '' : idleSites > 0 ? ` · ${idleSites} idle sites not listed: search finds them` : '';
    $('#count').textContent = `${list.length} shown of ${everything.length} (${rows.length} active)${hidden}${open.size > 0 ? ' · order held while a row is open' : ''}`;
    $('#more').textContent = list.length > shown.length ? `${list.length - shown.length} more: narrow the search` : '';
    for (const th of document.querySelectorAll('#pools th')) th.setAttribute('aria-sort', th.dataset.sort === key ? (dir < 0 ? 'descending' : 'ascending') : 'none');
  }

  function renderDaemons() {
    $('#daemons').innerHTML = daemons.map((d) => {
      const s = d.sites;
      const broken = s && s.broken > 0 ? ` <details class="broken"><summary>${s.broken} broken</summary><ul>${s.brokenSites.map((b) => `<li><b>${esc(b.id)}</b>: ${esc(b.error)}</li>`).join('')}</ul></details>` : '';
      return `<span class="daemon${d.up ? '' : ' is-down'}" data-daemon-id="${esc(d.id)}" data-up="${d.up}"><b>${esc(d.label)}</b> ${d.up ? `<span class="muted">${esc(d.state)}${s ? ` · sites ${s.defined} defined, ${s.active} active` : ''}</span>${broken}` : `<span class="reason">${esc(d.reason)}</span>`}</span>`;
    }).join('');
  }

  // ---- a row's details ----------------------------------------------------------------

  function chart(points, field, label, unit = '') {
    const w = 300, h = 48;
    const vals = points.map((p) => p[field] ?? 0);
    const max = Math.max(1, ...vals);
    const t0 = points.length ? points[0].t : 0, t1 = points.length ? points[points.length - 1].t : 1;
    const line = points.map((p, i) => `${(((p.t - t0) / Math.max(1, t1 - t0)) * w).toFixed(1)},${(h - (vals[i] / max) * (h - 2) - 1).toFixed(1)}`).join(' ');
    const last = vals.length ? vals[vals.length - 1] : 0;
    return `<div class="chart"><span class="muted">${esc(label)}</span> <b>${esc(last)}${unit}</b> <span class="muted">max ${esc(max)}${points.length ? ` · since ${new Date(t0).toLocaleTimeString()}` : ''}</span>
      <svg class="chart-${field}" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" data-last="${esc(last)}" data-points="${points.length}" role="img" aria-label="${esc(label)}"><polyline points="${line}"/></svg></div>`;
  }

  /** Figures and charts: the same shape with a pool or without, so a refresh never moves the form below. */
  function figuresHtml(det) {
    const p = det.status;
    const o = p?.outcomes ?? { status: {}, refusals: {} };
    const refusals = Object.entries(o.refusals ?? {}).map(([c, n]) => `${esc(c)} ${n}`).join(', ') || 'none';
    const v = (html) => (p ? html : '–');
    const pm = p ? `${esc(p.pm)} · <span class="max-children">${esc(p.maxChildren ?? '–')}</span>` : '<span class="no-pool" title="the site gets one on its next request">no pool now</span>';
    return `<div class="figures">
        <div><span class="muted">pm · max_children</span><b>${pm}</b></div>
        <div><span class="muted">queue (limit)</span><b>${v(`${p?.queue.length} (${p?.queue.limit})`)}</b></div>
        <div><span class="muted">responses 2xx / 4xx / 5xx</span><b>${v(`${o.status['2xx'] ?? 0} / ${o.status['4xx'] ?? 0} / ${o.status['5xx'] ?? 0}`)}</b></div>
        <div><span class="muted">answered by fcgi-pm</span><b class="small" title="${v(refusals)}">${v(refusals)}</b></div>
        <div><span class="muted">crashes</span><b>${v(p?.crashes)}</b></div>
        <div><span class="muted">up</span><b>${v(p && age(p.startedAt))}</b></div>
      </div>
      <div class="charts">${chart(det.points, 'rps', 'req/s')}${chart(det.points, 'p99', 'p99', ' ms')}${chart(det.points, 'busy', 'busy workers')}${chart(det.points, 'queue', 'queue')}</div>`;
  }

  /** The workers: as many rows as there are, so they come below the form. */
  function workersHtml(det) {
    const workers = (det.status?.workers ?? []).map((w) => `<tr data-pid="${w.pid}"><td>${w.pid}</td><td>${esc(w.state)}</td><td>${w.requests}</td><td>${age(w.startedAt)}</td><td>${size(w.memory)}</td><td>${esc(w.cpu ?? '–')}</td><td>${esc(w.request ? `${w.request.method} ${w.request.uri}` : '')}</td></tr>`).join('');
    return `<table class="workers"><thead><tr><th>pid</th><th>state</th><th>requests</th><th>up</th><th>memory</th><th>cpu %</th><th>request</th></tr></thead><tbody>${workers || `<tr><td colspan="7" class="muted">${det.status ? 'no workers' : 'no pool now: the site gets one on its next request'}</td></tr>`}</tbody></table>`;
  }

  const ACTIONS = [['restart', 'Restart workers'], ['rolling', 'Rolling restart'], ['drain', 'Drain']];

  function formHtml(k, det) {
    const f = det.form;
    if (f.readOnly) return `<p class="read-only muted" data-read-only>${esc(f.readOnly)}</p>`;
    const fields = editable.map((key) => `<label>${esc(key)} <input data-key="${esc(key)}" value="${esc(f.values[key] ?? '')}" placeholder="(default)"></label>`).join('');
    const holders = rows.filter((r) => r.pool === det.pool).map((r) => r.d);
    const also = f.kind === 'config' && holders.length > 1 ? `<label class="inline"><input type="checkbox" class="edit-all"> on every daemon with pool ${esc(det.pool)} (${holders.length})</label>` : '';
    return `<form class="edit" data-for="${esc(k)}" data-hash="${esc(f.hash)}" data-kind="${esc(f.kind)}">
        <p class="muted">${f.kind === 'site' ? 'Site file' : 'Config file'} <code class="edit-file">${esc(f.file)}</code>: current values; an emptied field goes back to its default.</p>
        <div class="fields">${fields}</div>${also}
        <button type="button" class="edit-preview">Preview diff</button> <button type="submit" class="edit-apply">Write${f.kind === 'config' ? ' and reload' : ''}</button>
        <div class="edit-result" aria-live="polite"></div></form>`;
  }

  function detailsHtml(k, det) {
    const p = det.status;
    const acts = p && p.kind !== 'external' ? `<span class="actions">${ACTIONS.map(([v, l]) => `<button type="button" class="pool-action" data-verb="${v}">${l}</button>`).join('')}</span>` : '';
    return `<td colspan="12"><div class="details-body"><div class="details-status">${figuresHtml(det)}</div>${acts}<div class="action-result" aria-live="polite"></div>
      <h3>Settings</h3><div class="details-form">${formHtml(k, det)}</div>
      <h3>Workers</h3><div class="details-workers">${workersHtml(det)}</div></div></td>`;
  }

  async function fetchDetails(k, withForm) {
    const [d, pool] = k.split(SEP);
    const o = open.get(k);
    if (!o) return;
    o.fetchedAt = Date.now();
    const r = await fetch(`api/pool?daemon=${encodeURIComponent(d)}&pool=${encodeURIComponent(pool)}`);
    const det = await r.json();
    if (!open.has(k)) return;
    steady(() => {
      if (!o.tr.firstChild || withForm) o.tr.innerHTML = detailsHtml(k, det);
      else {
        $('.details-status', o.tr).innerHTML = figuresHtml(det);
        $('.details-workers', o.tr).innerHTML = workersHtml(det);
      }
    });
    o.tr.dataset.loaded = 'true';
  }

  function toggle(k) {
    if (open.has(k)) {
      open.get(k).tr.remove();
      open.delete(k);
    } else {
      const tr = document.createElement('tr');
      tr.className = 'details';
      tr.dataset.key = k;
      [tr.dataset.daemon, tr.dataset.pool] = k.split(SEP);
      open.set(k, { tr, fetchedAt: 0 });
      void fetchDetails(k, true);
    }
    steady(() => renderTable());
  }

  // mode: preview | edit | site (a site file: its directory's watch applies it) | restart | rolling | drain
  function resultHtml(out, mode) {
    const done = { edit: 'written and reloaded', site: 'written; the site picks it up', restart: 'workers replaced' }[mode] ?? 'done';
    const did = (rep) => (rep?.action === 'restart' ? `${rep.started.length} worker(s) replaced one by one` : rep?.action === 'drain' ? `${rep.retired.length} worker(s) retired` : done);
    const html = (out.results || []).map((r) => {
      const d = daemons.find((x) => x.id === r.id);
      const diff = (r.diff || []).map((l) => `<span class="${l.op === '+' ? 'add' : l.op === '-' ? 'del' : ''}">${esc(l.op)} ${esc(l.text)}</span>`).join('\n');
      const probs = [...(r.problems || []), ...(r.reload?.problems || [])];
      const status = r.error ? esc(r.error) : r.reload ? (r.reload.ok ? did(r.reload.report) : `${mode === 'rolling' || mode === 'drain' ? mode : 'reload'} failed: ${esc(r.reload.error)}`) : r.ok ? (mode === 'preview' ? 'valid' : 'valid; not written') : 'invalid';
      return `<div class="result ${r.ok ? '' : 'bad'}" data-result="${esc(r.id)}" data-ok="${r.ok}" data-conflict="${r.conflict === true}"><b>${esc(d ? d.label : r.id)}</b>: <span class="status">${status}</span>
        ${probs.length ? `<ul class="problems">${probs.map((p) => `<li>${esc(p)}</li>`).join('')}</ul>` : ''}${diff ? `<pre class="diff">${diff}</pre>` : ''}</div>`;
    }).join('');
    const head = out.error ? `<p class="reason">${esc(out.error)}</p>` : out.applied ? '<p>Applied.</p>' : mode === 'preview' ? '<p>Preview: nothing written.</p>' : mode === 'edit' || mode === 'site' ? '<p class="reason">Nothing was changed on any daemon.</p>' : '';
    return head + html;
  }

  async function post(path, body) {
    const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' });
    return r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  }

  async function submitEdit(form, dry) {
    const k = form.dataset.for;
    const [d, pool] = k.split(SEP);
    const settings = {};
    for (const input of form.querySelectorAll('input[data-key]')) {
      const was = input.defaultValue, now = input.value.trim();
      if (now !== was) settings[input.dataset.key] = now === '' ? null : now;
    }
    const res = $('.edit-result', form);
    if (Object.keys(settings).length === 0) {
      res.innerHTML = '<div class="result" data-result="none">nothing changed</div>';
      return;
    }
    const all = $('.edit-all', form);
    const targets = all && all.checked ? [...new Set(rows.filter((r) => r.pool === pool).map((r) => r.d))] : [d];
    res.innerHTML = '<span class="muted">working…</span>';
    const out = await post('api/edit', { targets, pool, settings, dryRun: dry, expect: { [d]: form.dataset.hash } });
    res.innerHTML = resultHtml(out, dry ? 'preview' : form.dataset.kind === 'site' ? 'site' : 'edit');
    // Written: the form shows the file as it is now (and its new hash).
    if (!dry && out.applied && (out.results || []).every((r) => r.ok)) {
      const keep = res.innerHTML;
      await fetchDetails(k, true);
      const o = open.get(k);
      if (o) $('.edit-result', o.tr).innerHTML = keep;
    }
  }

  // ---- warnings -----------------------------------------------------------------------

  function renderWarnings() {
    const level = $('#log-level').value;
    const pool = $('#log-pool').value.trim().toLowerCase();
    const list = warnings.filter((w) => (level === 'error' ? w.level !== 'warn' : true) && (pool === '' || (w.pool ?? '').toLowerCase().includes(pool) || w.msg.toLowerCase().includes(pool)));
    $('#warnings').innerHTML = list.length === 0 ? '<li class="muted">none</li>' : list.map((w) => `<li class="${esc(w.level)}" data-code="${esc(w.code)}" data-warning-daemon="${esc(w.daemon)}"><code>${esc(w.code)}</code> ${esc(w.msg)}${w.count > 1 ? ` <span class="muted">×${w.count}</span>` : ''} <span class="muted">${esc(w.daemon)}${w.pool ? ` · ${esc(w.pool)}` : ''} · ${age(w.last)} ago</span></li>`).join('');
  }

  // ---- wiring -------------------------------------------------------------------------

  $('#pools thead').addEventListener('click', (e) => {
    const th = e.target.closest('th[data-sort]');
    if (!th) return;
    const k = th.dataset.sort;
    sort = sort.key === k ? { key: k, dir: -sort.dir } : { key: k, dir: NUMERIC.has(k) ? -1 : 1 };
    renderTable(true);
  });
  $('#pools tbody').addEventListener('click', (e) => {
    const act = e.target.closest('.pool-action');
    if (act) {
      const k = act.closest('tr.details').dataset.key;
      const [d, pool] = k.split(SEP);
      const out = $('.action-result', act.closest('tr.details'));
      out.textContent = 'working…';
      void post(act.dataset.verb === 'drain' ? 'api/drain' : 'api/restart', { targets: [d], pool, rolling: act.dataset.verb === 'rolling' }).then((r) => {
        out.innerHTML = resultHtml(r, act.dataset.verb);
      });
      return;
    }
    if (e.target.closest('.edit-preview')) return void submitEdit(e.target.closest('form'), true);
    const row = e.target.closest('tr.row');
    if (row) toggle(row.dataset.key);
  });
  $('#pools tbody').addEventListener('submit', (e) => {
    e.preventDefault();
    void submitEdit(e.target, false);
  });
  $('#pools tbody').addEventListener('keydown', (e) => {
    const row = e.target.closest('tr.row');
    if (row && (e.key === 'Enter' || e.key === ' ')) {
      e.preventDefault();
      toggle(row.dataset.key);
    }
  });
  $('#search').addEventListener('input', () => renderTable(true));
  $('#show-idle').addEventListener('change', () => renderTable(true));
  $('#log-level').addEventListener('change', renderWarnings);
  $('#log-pool').addEventListener('input', renderWarnings);

  const es = new EventSource('api/events');
  es.addEventListener('hello', (e) => {
    editable = JSON.parse(e.data).editable;
  });
  es.addEventListener('sites', (e) => {
    sites = new Map(JSON.parse(e.data).map((x) => [x.d, x.sites]));
    steady(() => renderTable());
  });
  es.addEventListener('tick', (e) => {
    const t = JSON.parse(e.data);
    daemons = t.daemons;
    for (const k of t.gone) rowByKey.delete(k);
    for (const r of t.rows) rowByKey.set(keyOf(r), r);
    rows = [...rowByKey.values()];
    steady(() => {
      renderDaemons();
      $('#updated').textContent = `updated ${new Date(t.at).toLocaleTimeString()}`;
      renderTable();
    });
    document.body.dataset.ticks = String(Number(document.body.dataset.ticks || 0) + 1);
    for (const [k, o] of open) if (Date.now() - o.fetchedAt > DETAILS_MS) void fetchDetails(k, false);
  });
  es.addEventListener('warnings', (e) => {
    warnings = JSON.parse(e.data);
    renderWarnings();
  });
  es.onopen = () => {
    $('#conn').textContent = 'live';
    $('#conn').className = 'pill';
  };
  es.onerror = () => {
    $('#conn').textContent = 'reconnecting…';
    $('#conn').className = 'pill down';
  };
})();
