/*!
 * harrier console — comparison pages. Plain ES2020, loaded with <script defer>
 * after static/harrier.js (window.harrier.fmt) and, where charts are drawn,
 * uPlot (static/vendor/uplot-1.6.32/).
 *
 *  - Compare page (body[data-page="compare"]): script#compare-data =
 *    {runs: [{id, name, color, summary_only, timeseries_url, distribution_url}]};
 *    overlay charts in div.chart[data-chart="cmp-p95"|"cmp-rps"|"cmp-err"|"cmp-pct"],
 *    x = seconds since each run's first bucket (so runs align at their start);
 *    select#compare-ref reloads the page with that run first.
 *  - Scenario page (body[data-page="scenario"]): script#scenario-data =
 *    {points: [TrendPoint], baseline_run_id, change_points: {figure: [...]}, figures};
 *    div.chart[data-chart="trend-<figure key>"]: one point per run on a time axis,
 *    the baseline's value dashed, regressions as red points, change points as
 *    vertical lines; with data.x_tag (select#trend-x, ?x=TAG) against that tag of the
 *    runs instead: its values on a numeric axis when all are numbers, else one tick per
 *    value in run order; button#baseline-unpin → DELETE /api/v1/scenarios/{name}/baseline.
 *  - Runs page: input.compare-pick checkboxes (added to rows that lack one, also
 *    rows the live table inserts) + form#compare-form → /console/compare?order=reference&runs=a,b
 *    (the server redirects with the reference first: the pinned baseline, else the oldest).
 *  - Run page: button#baseline-pin[data-scenario][data-run-id] → PUT the baseline.
 */
(() => {
  'use strict';
  const doc = document;
  const $ = (s, r = doc) => r.querySelector(s);
  const $$ = (s, r = doc) => Array.from(r.querySelectorAll(s));
  const fmt = () => (window.harrier && window.harrier.fmt) || null;
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const cssVar = (n, f) => getComputedStyle(doc.documentElement).getPropertyValue(n).trim() || f;

  function island(id) {
    const el = doc.getElementById(id);
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { console.error('harrier: bad #' + id, e); return null; }
  }

  function emptyBox(box, title, help) {
    box.querySelectorAll('.chart-empty').forEach((n) => n.remove());
    const d = doc.createElement('div');
    d.className = 'chart-empty';
    d.setAttribute('role', 'note');
    const s = doc.createElement('strong');
    s.textContent = title;
    d.append(s);
    if (help) { const sp = doc.createElement('span'); sp.textContent = help; d.append(sp); }
    box.append(d);
  }

  function axes(xLabel, yLabel, xFmt, yFmt) {
    const grid = cssVar('--c-grid', '#eee');
    const stroke = cssVar('--c-axis', '#666');
    const font = '11.5px ' + cssVar('--font', 'sans-serif');
    const x = { stroke, font, grid: { stroke: grid, width: 1 }, ticks: { show: false } };
    if (xLabel) Object.assign(x, { label: xLabel, labelSize: 18 });
    if (xFmt) x.values = (u, s) => s.map(xFmt);
    return [
      x,
      { stroke, font, label: yLabel, labelSize: 18, size: 64, grid: { stroke: grid, width: 1 }, ticks: { show: false }, values: (u, s) => s.map(yFmt) },
    ];
  }

  function plot(box, opts, data) {
    box.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
    const width = Math.max(240, box.clientWidth);
    const height = Math.max(140, box.clientHeight - 40);
    const u = new uPlot(Object.assign({ width, height, legend: { live: true } }, opts), data, box);
    return u;
  }

  /** Union of x values; each run's y mapped onto it (null where absent). */
  function align(lines) {
    const xs = Array.from(new Set(lines.flatMap((l) => l.x))).sort((a, b) => a - b);
    const pos = new Map(xs.map((x, i) => [x, i]));
    const ys = lines.map((l) => {
      const y = new Array(xs.length).fill(null);
      l.x.forEach((x, i) => { y[pos.get(x)] = isNum(l.y[i]) ? l.y[i] : null; });
      return y;
    });
    return [xs].concat(ys);
  }

  // ── compare page ──────────────────────────────────────────────────────
  async function initCompare() {
    const data = island('compare-data');
    const sel = $('#compare-ref');
    if (sel) sel.addEventListener('change', () => {
      const u = new URL(location.href);
      u.searchParams.set('runs', sel.value);
      location.assign(u.toString());
    });
    const boxes = {
      p95: $('.chart[data-chart="cmp-p95"]'), rps: $('.chart[data-chart="cmp-rps"]'),
      err: $('.chart[data-chart="cmp-err"]'), pct: $('.chart[data-chart="cmp-pct"]'),
    };
    if (!data || !boxes.p95) return;
    if (typeof uPlot === 'undefined') {
      for (const b of Object.values(boxes)) if (b) emptyBox(b, 'Chart library not loaded', '');
      return;
    }
    const get = async (url) => {
      const r = await fetch(url, { headers: { Accept: 'application/json' } });
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    };
    let loaded;
    try {
      loaded = await Promise.all(data.runs.map(async (run) => ({
        run,
        series: await get(run.timeseries_url),
        dist: await get(run.distribution_url).catch(() => null),
      })));
    } catch (e) {
      for (const b of Object.values(boxes)) if (b) emptyBox(b, 'Could not load the series', String(e.message || e));
      return;
    }
    const f = fmt();
    const secs = (v) => (isNum(v) ? f.num(v, v < 10 && v % 1 ? 1 : 0) + ' s' : f.NULL);
    const series = (u, fmtFn) => loaded.map((l) => ({
      label: '#' + l.run.id + ' ' + l.run.name, stroke: l.run.color, width: 1.5, spanGaps: true,
      points: { show: false }, value: (uu, v) => (isNum(v) ? fmtFn(v) : f.NULL),
    }));
    const lines = (key, perSec) => loaded.map((l) => {
      const s = l.series || {};
      const t = s.t_ms || [];
      const t0 = t.length ? t[0] : 0;
      const bs = (s.bucket_ms || 1000) / 1000;
      return {
        x: t.map((v) => (v - t0) / 1000),
        y: (s[key] || []).map((v) => (isNum(v) ? (perSec ? v / bs : v) : null)),
      };
    });
    const charts = [];
    const make = (box, key, perSec, yLabel, fmtFn) => {
      const d = align(lines(key, perSec));
      if (d[0].length === 0) { emptyBox(box, 'No over-time data', 'Summary-only runs have totals only.'); return; }
      charts.push(plot(box, {
        scales: { x: { time: false }, y: { range: (u, mn, mx) => [0, mx > 0 ? mx * 1.08 : 1] } },
        series: [{ label: 'seconds', value: (u, v) => secs(v) }].concat(series(null, fmtFn)),
        axes: axes('seconds since start', yLabel, (v) => f.num(v, 0), (v) => f.num(v, v < 10 && v % 1 ? 1 : 0)),
        cursor: { sync: { key: 'harrier-compare' } },
      }, d));
    };
    make(boxes.p95, 'p95_ms', false, 'ms', f.ms);
    make(boxes.rps, 'count', true, 'req/s', f.rps);
    make(boxes.err, 'error_pct', false, '%', f.pct);
    if (boxes.pct) {
      const curves = loaded.map((l) => ({
        x: (l.dist && l.dist.curve && l.dist.curve.p) || [],
        y: (l.dist && l.dist.curve && l.dist.curve.ms) || [],
      }));
      const d = align(curves);
      if (d[0].length === 0) emptyBox(boxes.pct, 'No distribution', 'Summary-only runs keep no per-request times.');
      else charts.push(plot(boxes.pct, {
        scales: { x: { time: false }, y: { range: (u, mn, mx) => [0, mx > 0 ? mx * 1.08 : 1] } },
        series: [{ label: 'percentile', value: (u, v) => (isNum(v) ? 'p' + v : f.NULL) }].concat(series(null, f.ms)),
        axes: axes('percentile', 'ms', (v) => 'p' + v, (v) => f.num(v, 0)),
      }, d));
    }
    window.harrier.compare = { data, loaded, charts };
  }

  // ── scenario page ─────────────────────────────────────────────────────
  function initScenario() {
    const data = island('scenario-data');
    const unpin = $('#baseline-unpin');
    if (unpin) unpin.addEventListener('click', async () => {
      const r = await fetch('/api/v1/scenarios/' + encodeURIComponent(unpin.dataset.scenario) + '/baseline', { method: 'DELETE' });
      if (r.ok || r.status === 404) location.reload();
    });
    const pickX = $('#trend-x');
    if (pickX) pickX.addEventListener('change', () => pickX.form.submit());
    if (!data || typeof uPlot === 'undefined') return;
    const f = fmt();
    const fmts = { p95_ms: f.ms, p99_ms: f.ms, mean_ms: f.ms, throughput_rps: f.rps, error_pct: f.pct };
    const names = { p95_ms: 'p95', p99_ms: 'p99', mean_ms: 'mean', throughput_rps: 'throughput', error_pct: 'error %' };
    const units = { p95_ms: 'ms', p99_ms: 'ms', mean_ms: 'ms', throughput_rps: 'req/s', error_pct: '%' };
    // Local-time ticks in the house format: the date once ticks are a day or more apart,
    // else the time of day with the date under the first tick of each day.
    const pad = (n) => String(n).padStart(2, '0');
    const day = (v) => { const d = new Date(v); return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()); };
    const trendTicks = (u, splits, axisIdx, space, incr) => splits.map((v, i) => {
      if (incr >= 86400000) return day(v);
      const clock = incr < 60000 ? f.clock(v) : f.clock(v).slice(0, 5);
      return i === 0 || day(v) !== day(splits[i - 1]) ? clock + '\n' + day(v) : clock;
    });
    // Against a tag (data.x_tag): the runs that carry it, at its value when every value is
    // a number (sorted by it), else in run order with the value as the tick.
    const tag = data.x_tag || null;
    let pts = data.points || [];
    let x = pts.map((p) => p.at_ms);
    let categories = null;
    if (tag) {
      pts = pts.filter((p) => p.tags && p.tags[tag] != null);
      const vals = pts.map((p) => String(p.tags[tag]).trim());
      const nums = vals.map((v) => (v === '' ? NaN : Number(v)));
      if (nums.every(Number.isFinite)) {
        const order = pts.map((p, i) => i).sort((a, b) => nums[a] - nums[b]);
        pts = order.map((i) => pts[i]);
        x = order.map((i) => nums[i]);
      } else {
        categories = [];
        for (const v of vals) if (!categories.includes(v)) categories.push(v);
        const order = pts.map((p, i) => i).sort((a, b) => categories.indexOf(vals[a]) - categories.indexOf(vals[b]));
        pts = order.map((i) => pts[i]);
        x = order.map((i) => categories.indexOf(vals[i]));
      }
    }
    const tagTicks = (u, splits) => splits.map((v) => (categories
      ? (Number.isInteger(v) && categories[v] != null ? categories[v] : '')
      : f.num(v, v % 1 ? 1 : 0)));
    const charts = [];
    for (const key of data.figures || []) {
      const box = $('.chart[data-chart="trend-' + key + '"]');
      if (!box) continue;
      if (pts.length === 0) { emptyBox(box, 'No runs', ''); continue; }
      const y = pts.map((p) => (isNum(p[key]) ? p[key] : null));
      const base = pts.find((p) => p.run.id === data.baseline_run_id);
      const bv = base && isNum(base[key]) ? base[key] : null;
      const reg = pts.map((p, i) => (p.regressions.includes(key) ? y[i] : null));
      // Change points are in run order: drawn on the time axis only.
      const cps = tag ? [] : ((data.change_points || {})[key] || []).map((c) => c.index);
      const color = cssVar('--c-p95', '#d97706');
      charts.push(plot(box, {
        ms: 1,
        scales: {
          x: tag
            ? { time: false, range: (u, mn, mx) => (mn === mx ? [mn - 1, mx + 1] : [mn - (mx - mn) * 0.04, mx + (mx - mn) * 0.04]) }
            : { time: true },
          y: { range: (u, mn, mx) => [0, mx > 0 ? mx * 1.1 : 1] },
        },
        series: [
          { label: 'run', value: (u, v, s, i) => (i == null ? '' : '#' + pts[i].run.id + ' ' + pts[i].run.name) },
          { label: names[key], stroke: color, width: 1.5, points: { show: true, size: 6 }, value: (u, v) => (isNum(v) ? fmts[key](v) : f.NULL) },
          { label: 'baseline', stroke: cssVar('--c-axis', '#888'), dash: [5, 4], width: 1, points: { show: false }, value: (u, v) => (isNum(v) ? fmts[key](v) : f.NULL) },
          { label: 'regression', stroke: cssVar('--c-p99', '#dc2626'), width: 0, paths: () => null, points: { show: true, size: 10, fill: cssVar('--c-p99', '#dc2626') }, value: (u, v) => (isNum(v) ? 'worse' : '') },
        ],
        axes: (() => {
          const a = axes(tag ? tag : '', names[key] + ', ' + units[key], null, (v) => f.num(v, v < 10 && v % 1 ? 1 : 0));
          a[0].values = tag ? tagTicks : trendTicks;
          if (categories) a[0].splits = () => categories.map((c, i) => i);
          a[0].size = 44;
          return a;
        })(),
        hooks: {
          draw: [(u) => {
            const c = u.ctx;
            c.save();
            c.strokeStyle = cssVar('--c-p99', '#dc2626');
            c.setLineDash([3, 3]);
            c.lineWidth = devicePixelRatio;
            for (const i of cps) {
              // between the run before the change and the first run after it
              const xa = u.valToPos(x[Math.max(0, i - 1)], 'x', true);
              const xb = u.valToPos(x[i], 'x', true);
              const px = (xa + xb) / 2;
              c.beginPath();
              c.moveTo(px, u.bbox.top);
              c.lineTo(px, u.bbox.top + u.bbox.height);
              c.stroke();
            }
            c.restore();
          }],
        },
      }, [x, y, x.map(() => bv), reg]));
    }
    window.harrier.scenario = { data, charts };
  }

  // ── runs page: pick runs to compare ───────────────────────────────────
  function initPicker() {
    const form = $('#compare-form');
    const table = $('#runs-table');
    if (!form || !table) return;
    const button = form.querySelector('button[type="submit"]');
    const status = $('#compare-status');
    const picked = () => $$('input.compare-pick:checked', table).map((c) => c.value);
    const refresh = () => {
      const n = picked().length;
      if (button) button.disabled = n < 2 || n > 10;
      if (status) status.textContent = n === 0 ? 'pick 2 to 10 runs' : n + ' picked';
    };
    const addBoxes = () => {
      for (const tr of $$('tr[data-run-id]', table)) {
        const cell = tr.cells[0];
        if (!cell || cell.querySelector('input.compare-pick')) continue;
        const box = doc.createElement('input');
        box.type = 'checkbox';
        box.className = 'compare-pick';
        box.value = tr.dataset.runId;
        box.setAttribute('aria-label', 'Pick run ' + tr.dataset.runId + ' to compare');
        cell.prepend(box);
      }
      refresh();
    };
    table.addEventListener('change', refresh);
    new MutationObserver(addBoxes).observe(table.tBodies[0] || table, { childList: true });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const ids = picked();
      if (ids.length < 2) return;
      // the server puts the reference first (the pinned baseline, else the oldest run)
      location.assign('/console/compare?order=reference&runs=' + ids.join(','));
    });
    addBoxes();
  }

  // ── run page: pin as baseline ─────────────────────────────────────────
  function initPin() {
    const b = $('#baseline-pin');
    if (!b) return;
    b.addEventListener('click', async () => {
      b.disabled = true;
      const r = await fetch('/api/v1/scenarios/' + encodeURIComponent(b.dataset.scenario) + '/baseline', {
        method: 'PUT', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ run_id: Number(b.dataset.runId) }),
      });
      let body = null;
      try { body = await r.json(); } catch (_) { /* not JSON */ }
      b.disabled = false;
      b.textContent = r.ok ? 'Baseline of ' + b.dataset.scenario + ' ✓' : 'Could not pin: ' + ((body && body.error) || r.status);
    });
  }

  function boot() {
    const page = doc.body.dataset.page;
    if (page === 'compare') initCompare();
    if (page === 'scenario') initScenario();
    initPicker();
    initPin();
  }
  // Deferred scripts run in document order and this one may come before harrier.js:
  // start on DOMContentLoaded, which fires after every deferred script has run.
  if (doc.readyState === 'complete') boot();
  else doc.addEventListener('DOMContentLoaded', boot);
})();
