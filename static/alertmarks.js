/*!
 * harrier console — alert marks on time charts (route page and run report).
 * Plain ES2020, no dependencies beyond uPlot instances handed to it; loaded with
 * <script defer> before harrier.js and exposed as window.harrierAlertMarks (and,
 * once harrier.js runs, window.harrier.alertMarks).
 *
 *  harrierAlertMarks.forRoute(routeId) / .forRun(runId) → marks = {draw, cursor}
 *    Add marks.draw to a uPlot's hooks.draw and marks.cursor to hooks.setCursor.
 *    The draw hook shades the time in which alerts of that subject were firing (the
 *    highest severity firing then: tinted band with a solid top strip) or only pending
 *    (light band, dashed top edge), at least 3 px wide, with a thin line and a flag
 *    where each alert fired; the cursor hook shows a tip
 *    (.chart-tip.alert-tip) with rule, state, start – end and the value with the
 *    rule's unit when the cursor is inside a period.
 *    Periods come from GET /api/v1/alerts/history?route_id=|run_id=&from=&to=
 *    (rows in force at `from` included); they are refetched, at most every 15 s,
 *    when a chart shows a range not yet read, and on harrier:alert_firing /
 *    alert_resolved / resync. Every chart that drew with the marks is redrawn
 *    when new periods arrive. Units come from GET /api/v1/alert-rules (once).
 *  harrierAlertMarks.instances → the marks objects made on this page; each has
 *    periods() (the periods read so far), refresh(), kind ("route_id"|"run_id"), id.
 *  harrierAlertMarks.periods(rows, nowMs) → [{rule, labels, state, start, end,
 *    value, open}] from history rows (any order): pending → firing → resolved /
 *    inactive; a period still open ends at nowMs; empty periods (pending and firing
 *    in the same evaluation, as with for = 0s) are left out.
 */
(() => {
  'use strict';

  const doc = document;
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const REFETCH_MS = 15000;
  const SEV_RANK = { critical: 3, page: 3, emergency: 3, fatal: 3, disaster: 3, error: 2, high: 2, major: 2, warning: 1, warn: 1, medium: 1, minor: 1 };
  const SEV_VAR = ['--c-alert-info', '--c-alert-warning', '--c-alert-error', '--c-alert-critical'];
  const SEV_FALLBACK = ['#1f5bc0', '#d97706', '#ea580c', '#dc2626'];
  const UNIT = { error_pct: ' %', errors_per_s: ' /s', throughput_per_s: ' /s', mean_ms: ' ms', p95_ms: ' ms', p99_ms: ' ms' };

  function cssVar(name, fallback) {
    const v = getComputedStyle(doc.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  function identity(row) {
    const keys = Object.keys(row.labels || {}).sort();
    return row.rule + '\u0000' + keys.map((k) => k + '=' + row.labels[k]).join('\u0000');
  }

  /** Periods from history rows: see the header. */
  function periods(rows, nowMs) {
    const sorted = (rows || []).slice().sort((a, b) => (a.at_ms - b.at_ms) || (a.id - b.id));
    const open = new Map();
    const out = [];
    for (const r of sorted) {
      const key = identity(r);
      const cur = open.get(key);
      if (cur) {
        cur.end = r.at_ms;
        cur.open = false;
        if (cur.end > cur.start) out.push(cur); // pending and firing in one evaluation: no pending period
        open.delete(key);
      }
      if (r.change === 'pending' || r.change === 'firing') {
        open.set(key, { rule: r.rule, labels: r.labels || {}, state: r.change, start: r.at_ms, end: nowMs, value: r.value, open: true });
      }
    }
    for (const p of open.values()) out.push(p);
    return out.sort((a, b) => a.start - b.start);
  }

  function make(param, id) {
    const charts = new Set();
    const state = { rows: [], from: Infinity, to: -Infinity, fetchedAt: 0, inflight: false, rules: null };
    let timer = null;

    function severity(rule) {
      const r = state.rules && state.rules.get(rule);
      return r ? SEV_RANK[String(r.severity || '').toLowerCase()] || 0 : 1;
    }

    function valueText(p) {
      if (!isNum(p.value)) return '';
      const r = state.rules && state.rules.get(p.rule);
      const H = window.harrier;
      const num = H ? H.fmt.num(p.value, Math.abs(p.value) >= 100 ? 0 : 2) : String(p.value);
      if (r && (r.measure === 'target_down' || r.measure === 'no_exchanges')) return p.value > 0 ? 'yes' : 'no';
      return num + (r ? UNIT[r.measure] || '' : '');
    }

    async function fetchRange(from, to) {
      if (state.inflight) return;
      state.inflight = true;
      try {
        if (!state.rules) {
          const res = await fetch('/api/v1/alert-rules', { headers: { Accept: 'application/json' } });
          state.rules = new Map(res.ok ? (await res.json()).map((r) => [r.name, r]) : []);
        }
        const url = '/api/v1/alerts/history?' + param + '=' + encodeURIComponent(id) +
          '&from=' + Math.floor(from) + '&to=' + Math.ceil(Math.max(to, Date.now())) + '&limit=5000';
        const res = await fetch(url, { headers: { Accept: 'application/json' } });
        if (!res.ok) return;
        state.rows = await res.json();
        state.from = from;
        state.to = Math.max(to, Date.now());
        state.fetchedAt = Date.now();
        for (const u of charts) if (u.root && u.root.isConnected) u.redraw(false, false); else charts.delete(u);
      } catch (_) {
        // no marks; the chart itself is unaffected
      } finally {
        state.inflight = false;
      }
    }

    function want(u) {
      const min = u.scales.x.min;
      const max = u.scales.x.max;
      if (!isNum(min) || !isNum(max)) return;
      const stale = Date.now() - state.fetchedAt > REFETCH_MS;
      if (min < state.from || (max > state.to && stale)) {
        clearTimeout(timer);
        timer = setTimeout(() => fetchRange(Math.min(min, state.from === Infinity ? min : state.from), max), 50);
      }
    }

    /**
     * The periods flattened into segments over time: where several alerts overlap (rules on
     * the same route) a segment is firing at the highest severity firing then, else pending.
     */
    function segments(ps) {
      const cuts = Array.from(new Set(ps.flatMap((p) => [p.start, p.end]))).sort((a, b) => a - b);
      const out = [];
      for (let i = 0; i + 1 < cuts.length; i++) {
        const a = cuts[i];
        const b = cuts[i + 1];
        const mid = (a + b) / 2;
        let rank = -1;
        let pending = false;
        for (const p of ps) {
          if (p.start > mid || p.end < mid) continue;
          if (p.state === 'firing') rank = Math.max(rank, severity(p.rule));
          else pending = true;
        }
        const state = rank >= 0 ? 'firing' : pending ? 'pending' : null;
        if (!state) continue;
        const last = out[out.length - 1];
        if (last && last.end === a && last.state === state && last.rank === rank) last.end = b;
        else out.push({ start: a, end: b, state, rank });
      }
      return out;
    }

    function draw(u) {
      charts.add(u);
      want(u);
      const ps = periods(state.rows, Date.now());
      if (!ps.length) return;
      const c = u.ctx;
      const { left, top, width, height } = u.bbox;
      const dpr = devicePixelRatio || 1;
      const xmin = u.scales.x.min;
      const xmax = u.scales.x.max;
      c.save();
      c.beginPath();
      c.rect(left, top, width, height);
      c.clip();
      for (const seg of segments(ps)) {
        if (seg.end < xmin || seg.start > xmax) continue;
        const x0 = u.valToPos(seg.start, 'x', true);
        const x1 = Math.max(u.valToPos(seg.end, 'x', true), x0 + 3 * dpr); // short periods stay visible
        const rank = Math.max(seg.rank, 0);
        const color = cssVar(SEV_VAR[rank], SEV_FALLBACK[rank]);
        c.fillStyle = color;
        c.strokeStyle = color;
        if (seg.state === 'firing') {
          c.globalAlpha = 0.13;
          c.fillRect(x0, top, x1 - x0, height);
          c.globalAlpha = 0.9;
          c.fillRect(x0, top, x1 - x0, 3 * dpr);
        } else {
          c.strokeStyle = cssVar('--c-alert-pending', '#c9a227');
          c.fillStyle = c.strokeStyle;
          c.globalAlpha = 0.07;
          c.fillRect(x0, top, x1 - x0, height);
          c.globalAlpha = 0.8;
          c.lineWidth = 1.5 * dpr;
          c.setLineDash([4 * dpr, 3 * dpr]);
          c.beginPath();
          c.moveTo(x0, top + dpr);
          c.lineTo(x1, top + dpr);
          c.stroke();
          c.setLineDash([]);
        }
      }
      // where each alert fired: a thin line and a flag on top (one per pixel column)
      const seen = new Set();
      c.globalAlpha = 0.85;
      c.lineWidth = dpr;
      for (const p of ps) {
        if (p.state !== 'firing' || p.start < xmin || p.start > xmax) continue;
        const x = Math.round(u.valToPos(p.start, 'x', true));
        if (seen.has(x)) continue;
        seen.add(x);
        const rank = severity(p.rule);
        const color = cssVar(SEV_VAR[rank], SEV_FALLBACK[rank]);
        c.strokeStyle = color;
        c.fillStyle = color;
        c.beginPath();
        c.moveTo(x, top);
        c.lineTo(x, top + height);
        c.stroke();
        c.beginPath();
        c.moveTo(x, top);
        c.lineTo(x + 7 * dpr, top);
        c.lineTo(x, top + 7 * dpr);
        c.closePath();
        c.fill();
      }
      c.globalAlpha = 1;
      c.restore();
    }

    function tipOf(u) {
      let tip = u.over.querySelector('.alert-tip');
      if (!tip) {
        tip = doc.createElement('div');
        tip.className = 'chart-tip alert-tip';
        tip.hidden = true;
        u.over.append(tip);
      }
      return tip;
    }

    function cursor(u) {
      const tip = tipOf(u);
      const left = u.cursor.left;
      if (!isNum(left) || left < 0) { tip.hidden = true; return; }
      const at = u.posToVal(left, 'x');
      const now = Date.now();
      const hits = periods(state.rows, now).filter((p) => at >= p.start && at <= p.end);
      if (!hits.length) { tip.hidden = true; return; }
      const H = window.harrier;
      const ts = (v) => (H ? H.fmt.ts(v) : new Date(v).toISOString());
      const time = (v) => (H ? H.fmt.time(v) : new Date(v).toISOString());
      tip.replaceChildren(...hits.slice(0, 4).map((p) => {
        const line = doc.createElement('div');
        const title = doc.createElement('span');
        title.className = 'chart-tip-title';
        title.textContent = p.rule + ' ' + p.state;
        const v = valueText(p);
        line.append(title, ' ' + ts(p.start) + ' \u2013 ' + (p.open ? 'now' : time(p.end)) + (v ? ' \u00b7 ' + v : ''));
        return line;
      }));
      tip.hidden = false;
      const w = tip.offsetWidth;
      const x = Math.min(Math.max(0, left + 12), Math.max(0, u.over.clientWidth - w - 4));
      tip.style.transform = 'translate(' + x + 'px, 4px)';
    }

    const refresh = () => { state.fetchedAt = 0; state.to = -Infinity; const u = charts.values().next().value; if (u) want(u); };
    for (const type of ['alert_firing', 'alert_resolved', 'resync']) doc.addEventListener('harrier:' + type, refresh);

    const marks = { kind: param, id, draw, cursor, periods: () => periods(state.rows, Date.now()), refresh, state };
    api.instances.push(marks);
    return marks;
  }

  const api = {
    periods,
    /** Every marks object made on this page (for tests and the console). */
    instances: [],
    forRoute: (routeId) => make('route_id', routeId),
    forRun: (runId) => make('run_id', runId),
  };
  window.harrierAlertMarks = api;
  if (window.harrier) window.harrier.alertMarks = api;
})();
