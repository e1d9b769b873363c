/*!
 * harrier console — service page (/console/services/{name}).
 * script#service-data = {service, instance, series: {from_ms, to_ms, resolution,
 *   series: [{instance, metric, unit, t_ms, mean, max}]}, series_url, range_ms}
 * div.chart[data-chart="cpu"|"memory"|"threads"|"gc"|"files"] (uPlot; mean per point);
 * div.chart[data-pool-kind][data-pool-name][data-unit][data-pending-unit]: one pool's
 *   in use / max / pending (stored metrics pool_<field>:<kind>:<name>), same range;
 * button[data-range] (aria-pressed) refetches series_url?from=&to=&instance=.
 * A chart whose metrics the service does not expose says so instead of drawing.
 */
(() => {
  'use strict';
  const doc = document;
  const $$ = (sel) => Array.from(doc.querySelectorAll(sel));
  const RANGES = { '15m': 15 * 60e3, '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };
  const CHARTS = {
    cpu: { metrics: [['cpu_pct', 'CPU % of one core'], ['process_cpu_usage_pct', 'process % of host'], ['system_cpu_usage_pct', 'system % of host']], unit: '%' },
    memory: { metrics: [['rss_bytes', 'resident'], ['heap_used_bytes', 'heap used'], ['nonheap_used_bytes', 'non-heap used'], ['heap_max_bytes', 'heap max']], unit: 'bytes' },
    threads: { metrics: [['threads', 'threads']], unit: '' },
    gc: { metrics: [['gc_ms_per_s', 'GC pause ms/s']], unit: 'ms/s' },
    files: { metrics: [['open_fds', 'open'], ['max_fds', 'max']], unit: '' },
  };
  const COLORS = ['--c-rps', '--c-p95', '--c-p50', '--c-max'];

  function start() {
    const H = window.harrier;
    const island = doc.getElementById('service-data');
    if (!H || !island) return;
    const fmt = H.fmt;
    let data;
    try { data = JSON.parse(island.textContent); } catch (_) { return; }
    const state = { body: data.series, rangeMs: data.range_ms || 3600e3, charts: [] };
    const cssVar = (n, f) => getComputedStyle(doc.documentElement).getPropertyValue(n).trim() || f;
    const bytes = (v) => (v >= 1073741824 ? fmt.num(v / 1073741824, 1) + ' GB' : v >= 1048576 ? fmt.num(v / 1048576, 0) + ' MB' : fmt.num(v / 1024, 0) + ' KB');
    const COUNTS = ['', 'connections', 'threads', 'requests', 'tasks'];
    const val = (unit) => (v) => (v === null || v === undefined ? fmt.NULL : unit === 'bytes' ? bytes(v)
      : fmt.num(v, v < 10 && !(COUNTS.includes(unit) && Number.isInteger(v)) ? 1 : 0) + (unit ? ' ' + unit : ''));

    function note(box, text) {
      const n = doc.createElement('div');
      n.className = 'chart-empty';
      n.setAttribute('role', 'note');
      n.textContent = text;
      box.append(n);
    }

    // have: [[series, label, unit, colour var?]…]; axisUnit: the y axis' unit ('' for counts)
    function plot(box, have, axisUnit) {
      if (!have.length) { note(box, 'Not exposed by this service'); return; }
      if (typeof uPlot === 'undefined') { note(box, 'Chart library not loaded'); return; }
      const times = Array.from(new Set(have.flatMap(([s]) => s.t_ms))).sort((a, b) => a - b);
      const cols = have.map(([s]) => { const m = new Map(s.t_ms.map((t, i) => [t, s.mean[i]])); return times.map((t) => (m.has(t) ? m.get(t) : null)); });
      const f = val(axisUnit);
      const u = new uPlot({
        width: Math.max(200, box.clientWidth), height: Math.max(100, box.clientHeight - 34), ms: 1,
        scales: { x: { time: true, min: state.body.from_ms, max: state.body.to_ms }, y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        series: [{ label: 'Time', value: (u, v) => (v ? fmt.ts(v) : '') }].concat(have.map(([, label, unit, colour], i) => { const g = val(unit); return { label, stroke: cssVar(colour || COLORS[i % COLORS.length], '#888'), width: 1.5, points: { show: false }, value: (u, v) => g(v) }; })),
        axes: [{ stroke: cssVar('--c-axis', '#666') }, { stroke: cssVar('--c-axis', '#666'), size: 70, values: (u, sp) => sp.map(f) }],
      }, [times].concat(cols), box);
      state.charts.push(u);
    }

    function draw() {
      for (const u of state.charts) u.destroy();
      state.charts = [];
      const series = (state.body && state.body.series) || [];
      const mine = (m) => series.find((s) => s.metric === m && s.instance === data.instance);
      for (const box of $$('.chart[data-chart]')) {
        box.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
        const spec = CHARTS[box.dataset.chart];
        plot(box, spec.metrics.map(([m, label]) => [mine(m), label, spec.unit]).filter(([s]) => s), spec.unit);
      }
      for (const box of $$('.chart[data-pool-kind]')) {
        box.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
        const id = box.dataset.poolKind + ':' + box.dataset.poolName;
        const unit = box.dataset.unit;
        const pending = box.dataset.pendingUnit;
        // max first (drawn under), so in use stays visible when the pool is at its max
        const fields = [['max', 'max', unit, '--c-max'], ['active', unit === 'threads' ? 'busy' : 'in use', unit, '--c-rps'], ['pending', pending === 'tasks' ? 'queued' : 'waiting', pending, '--c-errs']];
        plot(box, fields.map(([f, label, u, c]) => [mine('pool_' + f + ':' + id), label, u, c]).filter(([s]) => s), '');
      }
      const n = doc.getElementById('series-note');
      if (n && state.body) n.textContent = (state.body.resolution === 'raw' ? 'per scrape' : state.body.resolution + ' means');
    }

    async function load() {
      const to = Date.now();
      const from = to - state.rangeMs;
      try {
        const res = await fetch(data.series_url + '?from=' + Math.round(from) + '&to=' + to + '&instance=' + encodeURIComponent(data.instance || ''));
        const body = await res.json();
        if (!res.ok) throw new Error(body.error || 'HTTP ' + res.status);
        state.body = body;
        draw();
      } catch (err) {
        for (const box of $$('.chart[data-chart], .chart[data-pool-kind]')) { box.querySelectorAll('.uplot, .chart-empty').forEach((x) => x.remove()); note(box, 'Could not load: ' + (err.message || err)); }
      }
    }
    for (const btn of $$('button[data-range]')) {
      btn.addEventListener('click', () => {
        state.rangeMs = RANGES[btn.dataset.range] || 3600e3;
        for (const b of $$('button[data-range]')) b.setAttribute('aria-pressed', b === btn ? 'true' : 'false');
        load();
      });
    }
    draw();
    setInterval(load, 15000);
    H.services = { data, state, load, draw };
  }
  if (window.harrier) start();
  else doc.addEventListener('DOMContentLoaded', start);
})();
