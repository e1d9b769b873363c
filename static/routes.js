/*!
 * harrier console — route pages (/console/routes, /console/routes/{id}).
 * Plain ES2020, loaded with <script defer> before harrier.js; it starts on
 * DOMContentLoaded, when window.harrier (fmt, live events, sortable tables) exists.
 *
 * ── Routes page (body[data-page="routes"]) ─────────────────────────────────
 *  table#routes-table > tbody > tr[data-route-id]: ONE PAGE of routes (server-side
 *    paging, search, filters and sort; the first page is rendered by the server, so the
 *    page reads without JS). Cells: service · route(link) · state(.badge) · td.tput ·
 *    td.err · td.mean · td.p95 · td.max · td.inflight · td.since (data-value = last
 *    exchange ms) · td.spark (<svg><polyline>).
 *  section#routes-panel[data-limit][data-total]; form#route-form (q, service, state,
 *    window — 10s | 1m | 5m | 15m, the window of the figures):
 *    typing (debounced), select changes and header links (th[data-key] a.sort-link) and
 *    pager links (#routes-pager a[data-page]) fetch GET /api/v1/routes?…&offset&limit and
 *    replace the rows; the URL follows (history.replaceState). Sparklines of the page
 *    come in one GET /api/v1/routes/sparklines?ids=….
 *  harrier:routes_updated {target_id, routes:[RouteRow]} (1 min figures) → only rows on
 *    screen are rewritten in place (no re-sort); their sparklines get the new point.
 *    Under another window the page is fetched again with it instead. A route id
 *    never seen before, with room on the page, fetches the page again.
 *  harrier:target_status {target} → tr[data-target-id] of table#targets-table.
 *  harrier:target_removed {id}, harrier:resync → the page is fetched again.
 *  td.since text ("12 s ago") is refreshed every second from its data-value.
 *
 * ── Route page (body[data-page="route"]) ───────────────────────────────────
 *  script#route-data = {route: RouteRow, series: Series+runs, series_url, range_ms}
 *  div.chart[data-chart="throughput"|"errors"|"latency"|"inflight"] (uPlot)
 *  button[data-range="15m"|"1h"|"6h"|"24h"|"7d"|"30d"] (aria-pressed) refetch
 *    series_url?from=&to=; runs overlapping the range that hit the route's service
 *    (or do not say what they hit: lighter, "target unknown") are shaded bands (click one:
 *    /console/runs/{id}) and listed as links in ul#run-bands. Alert periods of this
 *    route are marked by static/alertmarks.js (forRoute) when it is loaded.
 *  Live tail: harrier:routes_updated naming this route refetches the series (at
 *    most every 5 s) and rewrites #route-kpis .kpi[data-key] values.
 *  Pools: route-data.pools = {series_url, instance, series} (the service's process
 *    series, see static/services.js); each div.chart[data-pool-kind][data-pool-name]
 *    [data-unit][data-pending-unit] of section#route-pools charts one pool's in use /
 *    max / pending on the route charts' range, fetched with them, zoom and cursor synced.
 *  Exposed as window.harrier.routes.
 */
(() => {
  'use strict';

  const doc = document;
  const $ = (sel, root = doc) => root.querySelector(sel);
  const $$ = (sel, root = doc) => Array.from(root.querySelectorAll(sel));
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const dv = (v) => (isNum(v) ? String(v) : '');
  const on = (type, fn) => doc.addEventListener('harrier:' + type, (e) => fn(e.detail));

  function h(tag, attrs, ...children) {
    const el = doc.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  const STATE_CLASS = { active: 'ok', idle: 'muted', down: 'err', Started: 'ok' };
  const SPARK_MS = 15 * 60 * 1000;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  function start() {
    const H = window.harrier;
    if (!H) return;
    const fmt = H.fmt;
    const NULL = fmt.NULL;
    const nullable = (text) => (text === NULL ? h('span', { class: 'num-null' }, NULL) : text);
    const ago = (ms) => (isNum(ms) ? fmt.duration(Math.max(0, Date.now() - ms)) + ' ago' : NULL);
    const inflightText = (v) => (isNum(v) ? fmt.num(v, Number.isInteger(v) ? 0 : 1) : NULL);

    // ── routes page ───────────────────────────────────────────────────────
    function sparkPoints(points) {
      const now = Date.now();
      const from = now - SPARK_MS;
      const pts = points.filter((p) => p[0] >= from);
      if (pts.length < 2) return '';
      const max = Math.max(0, ...pts.map((p) => p[1]));
      return pts.map(([t, v]) => {
        const x = Math.min(100, Math.max(0, (t - from) / SPARK_MS * 100));
        const y = max > 0 ? 23 - v / max * 22 : 23;
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' ');
    }

    function sparkCell(points) {
      const td = h('td', { class: 'spark' });
      const svg = doc.createElementNS(SVG_NS, 'svg');
      svg.setAttribute('viewBox', '0 0 100 24');
      svg.setAttribute('preserveAspectRatio', 'none');
      svg.setAttribute('aria-hidden', 'true');
      const line = doc.createElementNS(SVG_NS, 'polyline');
      line.setAttribute('points', sparkPoints(points));
      svg.append(line);
      td.append(svg);
      return td;
    }

    /** A routes-table row, the same HTML as web/routes_row.html. */
    function routeRow(r, spark) {
      // red from 5 % errors, amber above 0: error_tone in server/http/console/mod.rs
      const tone = !isNum(r.error_pct) || r.error_pct <= 0 ? '' : r.error_pct >= 5 ? ' bad' : ' warn';
      return h('tr', { 'data-route-id': r.id, 'data-target-id': r.target_id },
        h('td', { 'data-value': r.service, class: 'service' }, h('a', { href: '/console/services/' + encodeURIComponent(r.service) }, r.service), ' ', h('span', { class: 'hint' }, r.instance)),
        h('td', { class: 'name route', 'data-value': r.route }, h('a', { href: r.url || '/console/routes/' + r.id }, r.route)),
        h('td', { class: 'state', 'data-value': r.state }, h('span', { class: 'badge ' + (STATE_CLASS[r.state] || 'warn') }, r.state)),
        h('td', { class: 'num tput', 'data-value': dv(r.throughput_per_s) }, nullable(fmt.num(r.throughput_per_s, 1))),
        h('td', { class: 'num err' + tone, 'data-value': dv(r.error_pct) }, nullable(fmt.num(r.error_pct, 2))),
        h('td', { class: 'num mean', 'data-value': dv(r.mean_ms) }, nullable(fmt.ms(r.mean_ms))),
        h('td', { class: 'num p95', 'data-value': dv(r.p95_ms) }, nullable(fmt.ms(r.p95_ms))),
        h('td', { class: 'num max', 'data-value': dv(r.max_ms) }, nullable(fmt.ms(r.max_ms))),
        h('td', { class: 'num inflight', 'data-value': dv(r.inflight) }, nullable(inflightText(r.inflight))),
        h('td', { class: 'num since', 'data-value': dv(r.last_exchange_ms) }, nullable(ago(r.last_exchange_ms))),
        sparkCell(spark || []),
      );
    }

    function initRoutesPage() {
      const table = $('#routes-table');
      if (!table) return;
      const panel = $('#routes-panel');
      const tbody = table.tBodies[0];
      const wrap = table.closest('.table-wrap');
      const empty = $('#routes-empty');
      const count = $('#routes-count');
      const form = $('#route-form');
      const input = $('#route-filter');
      const svc = $('#route-service');
      const stateSel = $('#route-state');
      const ctxSel = $('#route-context');
      const groupSel = $('#route-group');
      const winSel = $('#route-window');
      const currentWindow = () => (winSel && winSel.value) || '1m';
      const summary = $('#routes-summary');
      const noneMatch = $('#routes-none-match');
      const params = new URLSearchParams(location.search);
      const view = {
        sort: table.dataset.sort || 'service',
        dir: table.dataset.dir || 'asc',
        offset: Math.max(0, Number(params.get('offset')) || 0),
        limit: Number(panel && panel.dataset.limit) || 100,
        total: null,
      };
      const NUMERIC = new Set(['throughput_per_s', 'error_pct', 'mean_ms', 'p95_ms', 'max_ms', 'inflight', 'last_exchange_ms']);
      /** route id → [[t_ms, per_s], …] of the rows on screen (for live appends). */
      const sparks = new Map();

      function query(over) {
        const v = Object.assign({}, view, over || {});
        const p = new URLSearchParams();
        const q = input ? input.value.trim() : '';
        if (q) p.set('q', q);
        if (currentWindow() !== '1m') p.set('window', currentWindow());
        if (panel && panel.dataset.own === 'show') p.set('own', 'show');
        if (svc && svc.value) p.set('service', svc.value);
        if (stateSel && stateSel.value) p.set('state', stateSel.value);
        if (ctxSel && ctxSel.value) p.set('context', ctxSel.value);
        if (groupSel && groupSel.value) p.set('group', groupSel.value);
        if (v.sort !== 'service' || v.dir !== 'asc') { p.set('sort', v.sort); p.set('dir', v.dir); }
        if (v.offset > 0) p.set('offset', String(v.offset));
        if (v.limit !== 100) p.set('limit', String(v.limit));
        return p;
      }
      const consoleHref = (over) => { const qs = query(over).toString(); return '/console/routes' + (qs ? '?' + qs : ''); };

      function setLink(a, offset) {
        if (offset === null) { a.removeAttribute('href'); a.setAttribute('aria-disabled', 'true'); return; }
        a.href = consoleHref({ offset });
        a.removeAttribute('aria-disabled');
      }

      function drawPager() {
        const total = view.total;
        if (total === null) return;
        const shown = tbody.rows.length;
        const end = Math.min(total, view.offset + shown);
        summary.textContent = total === 0 ? 'No route matches'
          : shown === 0 ? 'Past the last of ' + fmt.int(total) + ' routes'
            : fmt.int(view.offset + 1) + '\u2013' + fmt.int(end) + ' of ' + fmt.int(total) + ' route' + (total === 1 ? '' : 's');
        const lastOffset = total === 0 ? 0 : Math.floor((total - 1) / view.limit) * view.limit;
        for (const a of $$('#routes-pager a[data-page]')) {
          const which = a.dataset.page;
          if (which === 'first') setLink(a, view.offset > 0 ? 0 : null);
          if (which === 'prev') setLink(a, view.offset > 0 ? Math.max(0, view.offset - view.limit) : null);
          if (which === 'next') setLink(a, end < total ? view.offset + view.limit : null);
          if (which === 'last') setLink(a, end < total && lastOffset > view.offset ? lastOffset : null);
        }
        for (const th of $$('thead th[data-key]', table)) {
          const key = th.dataset.key;
          const current = key === view.sort;
          th.setAttribute('aria-sort', current ? (view.dir === 'desc' ? 'descending' : 'ascending') : 'none');
          const dir = current ? (view.dir === 'desc' ? 'asc' : 'desc') : (NUMERIC.has(key) ? 'desc' : 'asc');
          const a = th.querySelector('a.sort-link');
          if (a) a.href = consoleHref({ sort: key, dir, offset: 0 });
        }
        const hidden = form && form.querySelector('input[name="sort"]');
        if (hidden) hidden.value = view.sort;
        const hdir = form && form.querySelector('input[name="dir"]');
        if (hdir) hdir.value = view.dir;
      }

      async function loadSparks(ids) {
        if (!ids.length) return;
        try {
          const res = await fetch('/api/v1/routes/sparklines?ids=' + ids.join(','), { headers: { Accept: 'application/json' } });
          if (!res.ok) return;
          const body = await res.json();
          for (const id of ids) {
            const pts = (body.routes && body.routes[String(id)]) || [];
            sparks.set(id, pts);
            const tr = findRow(id);
            const line = tr && tr.querySelector('td.spark polyline');
            if (line) line.setAttribute('points', sparkPoints(pts));
          }
        } catch (_) { /* sparklines are decoration: the table stands without them */ }
      }

      const findRow = (id) => Array.from(tbody.rows).find((tr) => tr.dataset.routeId === String(id));
      const pageIds = () => Array.from(tbody.rows).map((tr) => Number(tr.dataset.routeId));

      let seq = 0;
      async function load(over) {
        Object.assign(view, over || {});
        const mine = ++seq;
        const p = query();
        if (!p.has('own')) p.set('own', 'hide'); // the console's default; the API's is show
        p.set('offset', String(view.offset));
        p.set('limit', String(view.limit));
        panel.setAttribute('aria-busy', 'true');
        try {
          const res = await fetch('/api/v1/routes?' + p.toString(), { headers: { Accept: 'application/json' } });
          const body = await res.json();
          if (mine !== seq) return;
          if (!res.ok) throw new Error((body && body.error) || 'HTTP ' + res.status);
          // keep the table's height while rows are swapped: no jump under the pointer
          if (wrap) wrap.style.minHeight = wrap.offsetHeight + 'px';
          sparks.clear();
          tbody.replaceChildren(...body.routes.map((r) => routeRow(r, [])));
          for (const r of body.routes) seen.add(r.id);
          view.total = body.total;
          // routes of the user's services (harrier's own may be hidden); the header counts them
          const theirs = body.all - (body.own_hidden || 0);
          if (count) count.textContent = fmt.int(theirs);
          if (wrap) { wrap.hidden = theirs === 0; requestAnimationFrame(() => { wrap.style.minHeight = ''; }); }
          if (empty) empty.hidden = theirs > 0;
          if (noneMatch) noneMatch.hidden = !(theirs > 0 && body.total === 0);
          drawPager();
          history.replaceState(null, '', consoleHref());
          loadSparks(body.routes.map((r) => r.id));
        } catch (err) {
          if (mine !== seq) return;
          summary.textContent = 'Could not load routes: ' + String(err.message || err);
        } finally {
          if (mine === seq) panel.removeAttribute('aria-busy');
        }
      }

      // sorting: a header click sorts on the server
      table.tHead.addEventListener('click', (e) => {
        const a = e.target.closest('a.sort-link');
        if (!a || e.metaKey || e.ctrlKey || e.shiftKey) return;
        e.preventDefault();
        const key = a.closest('th').dataset.key;
        const dir = key === view.sort ? (view.dir === 'desc' ? 'asc' : 'desc') : (NUMERIC.has(key) ? 'desc' : 'asc');
        load({ sort: key, dir, offset: 0 });
      });
      // paging
      $('#routes-pager').addEventListener('click', (e) => {
        const a = e.target.closest('a[data-page]');
        if (!a || e.metaKey || e.ctrlKey || e.shiftKey) return;
        e.preventDefault();
        if (!a.hasAttribute('href')) return;
        const offset = Number(new URL(a.href, location.href).searchParams.get('offset')) || 0;
        load({ offset });
      });
      // search and filters
      if (form) form.addEventListener('submit', (e) => { e.preventDefault(); load({ offset: 0 }); });
      let typing = 0;
      if (input) input.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(() => load({ offset: 0 }), 250); });
      for (const sel of [svc, stateSel, ctxSel, groupSel]) if (sel) sel.addEventListener('change', () => load({ offset: 0 }));
      if (winSel) {
        winSel.addEventListener('change', () => {
          const opt = winSel.selectedOptions[0];
          const words = $('#window-words');
          if (words && opt) words.textContent = opt.dataset.words || opt.textContent;
          const json = $('#routes-json');
          if (json) json.href = '/api/v1/routes?window=' + encodeURIComponent(currentWindow());
          load();
        });
      }
      const apply = $('#route-apply');
      if (apply) apply.hidden = true;

      // live: only the rows on screen are rewritten, in place (no re-sort, no jump)
      // ids known to exist (on screen or announced): a route never seen before is new, and
      // a page with room for it is fetched again (at most once a second)
      const seen = new Set(pageIds());
      let refetch = 0;
      on('routes_updated', (msg) => {
        if (!msg || !Array.isArray(msg.routes)) return;
        // the event carries 1 min figures: under another window the rows on screen are
        // fetched again with it (at most once a second) rather than overwritten
        if (currentWindow() !== '1m') {
          if (msg.routes.some((r) => findRow(r.id))) {
            clearTimeout(refetch);
            refetch = setTimeout(() => load(), 1000);
          }
          return;
        }
        let fresh = false;
        for (const r of msg.routes) {
          if (!seen.has(r.id)) { seen.add(r.id); fresh = true; }
          const old = findRow(r.id);
          if (!old) continue;
          let pts = sparks.get(r.id) || [];
          if (isNum(r.throughput_per_s)) {
            pts = pts.concat([[Date.now(), r.throughput_per_s]]).filter((p) => p[0] >= Date.now() - SPARK_MS);
            sparks.set(r.id, pts);
          }
          old.replaceWith(routeRow(r, pts));
        }
        if (fresh && tbody.rows.length < view.limit) {
          clearTimeout(refetch);
          refetch = setTimeout(() => load(), 1000);
        }
      });
      on('target_removed', (msg) => {
        const t = $('#targets-table tr[data-target-id="' + (msg && msg.id) + '"]');
        if (t) t.remove();
        load();
      });
      on('target_status', (msg) => updateTarget(msg && msg.target));
      on('resync', async () => {
        load();
        try {
          const res = await fetch('/api/v1/targets');
          if (res.ok) for (const t of await res.json()) updateTarget(t);
        } catch (_) { /* next event */ }
      });

      // "12 s ago" keeps counting
      setInterval(() => {
        for (const td of $$('td.since', tbody)) {
          const v = Number(td.dataset.value);
          if (td.dataset.value && Number.isFinite(v)) td.textContent = ago(v);
        }
      }, 1000);

      // the first page came from the server; total is in its summary, sparks to fetch
      view.total = Number(panel.dataset.total) || 0;
      loadSparks(pageIds());
      H.routes.view = { view, load, sparks };
    }

    function updateTarget(t) {
      const table = $('#targets-table');
      if (!table || !t) return;
      const tr = $$('tr[data-target-id]', table).find((r) => r.dataset.targetId === String(t.id));
      if (!tr) return; // a new target: the next resync or reload shows it
      const status = t.up === true ? ['up', 'ok'] : t.up === false ? ['down', 'err'] : ['pending', 'muted'];
      const cell = tr.querySelector('td.status');
      cell.dataset.value = status[0];
      cell.replaceChildren(h('span', { class: 'badge ' + status[1] }, status[0]));
      const scraped = tr.querySelector('td.scraped');
      scraped.dataset.value = dv(t.last_scrape_ms);
      scraped.replaceChildren(isNum(t.last_scrape_ms)
        ? h('time', { 'data-ts-ms': t.last_scrape_ms, 'data-ts-format': 'time', title: fmt.isoUtc(t.last_scrape_ms) }, fmt.time(t.last_scrape_ms))
        : nullable(NULL));
      const took = tr.querySelector('td.took');
      took.dataset.value = dv(t.last_duration_ms);
      took.replaceChildren(nullable(fmt.ms(t.last_duration_ms)));
      const samples = tr.querySelector('td.samples');
      samples.dataset.value = dv(t.samples);
      samples.replaceChildren(nullable(fmt.int(t.samples)));
      tr.querySelector('td.last-error').replaceChildren(t.last_error ? h('span', { class: 'bad' }, t.last_error) : '');
    }

    // ── route page ────────────────────────────────────────────────────────
    const RANGES = { '15m': 15 * 60e3, '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3, '7d': 7 * 86400e3, '30d': 30 * 86400e3 };

    function cssVar(name, fallback) {
      const v = getComputedStyle(doc.documentElement).getPropertyValue(name).trim();
      return v || fallback;
    }

    function initRoutePage() {
      const island = $('#route-data');
      if (!island) return;
      let data;
      try { data = JSON.parse(island.textContent); } catch (err) { console.error('harrier: bad #route-data', err); return; }
      const boxes = {};
      for (const el of $$('.chart[data-chart]')) boxes[el.dataset.chart] = el;
      const poolBoxes = $$('.chart[data-pool-kind]');
      const stepBox = $('.chart[data-chart-steps]');
      const stepTree = $('#step-tree');
      const state = { series: data.series, pools: data.pools ? data.pools.series : null, rangeMs: data.range_ms || 3600e3, charts: [], lastFetch: 0, timer: null };
      const marks = window.harrierAlertMarks ? window.harrierAlertMarks.forRoute(data.route.id) : null; // static/alertmarks.js

      function emptyBox(box, title, help) {
        box.querySelectorAll('.chart-empty').forEach((n) => n.remove());
        box.append(h('div', { class: 'chart-empty', role: 'note' }, h('strong', null, title), help ? h('span', null, help) : null));
      }

      function bandsHook(runs) {
        return (u) => {
          if (!runs || !runs.length) return;
          const c = u.ctx;
          const { left, top, width, height } = u.bbox;
          c.save();
          c.beginPath();
          c.rect(left, top, width, height);
          c.clip();
          const dpr = devicePixelRatio;
          c.font = (10 * dpr) + 'px ' + cssVar('--font', 'sans-serif');
          c.textAlign = 'left';
          c.textBaseline = 'alphabetic';
          // Labels go in up to three lanes, each label in the first lane where it does
          // not overprint the one before; a label with no room is left out (the list
          // under the chart names every run).
          const lanes = [];
          const sorted = runs.slice().sort((a, b) => a.started_at_ms - b.started_at_ms);
          for (const r of sorted) {
            const x0 = u.valToPos(r.started_at_ms, 'x', true);
            const x1 = u.valToPos(r.ended_at_ms, 'x', true);
            // A run that does not say what it hit is shaded lighter.
            c.globalAlpha = r.hit === 'unknown' ? 0.5 : 1;
            c.fillStyle = cssVar('--c-run-band', 'rgba(124, 58, 237, .10)');
            c.fillRect(x0, top, Math.max(x1 - x0, 2 * dpr), height);
            c.globalAlpha = 1;
            const w = c.measureText(r.name).width + 8 * dpr;
            // From the band's start, kept inside the plot.
            const x = Math.max(left + 3 * dpr, Math.min(x0 + 3 * dpr, left + width - w));
            let lane = lanes.findIndex((end) => end <= x);
            if (lane < 0 && lanes.length < 3) lane = lanes.push(0) - 1;
            if (lane < 0) continue;
            lanes[lane] = x + w;
            c.fillStyle = cssVar('--c-axis', '#666');
            c.fillText(r.name, x, top + (11 + 12 * lane) * dpr);
          }
          c.restore();
        };
      }

      function runAt(runs, ms) {
        return (runs || []).find((r) => ms >= r.started_at_ms && ms <= r.ended_at_ms);
      }

      let syncing = false;
      function sync(src) {
        if (syncing) return;
        syncing = true;
        for (const u of state.charts) if (u !== src) u.setScale('x', { min: src.scales.x.min, max: src.scales.x.max });
        syncing = false;
      }

      // One chart per pool: in use, max and waiting/queued, on the route charts' range.
      function drawPools(s) {
        for (const box of poolBoxes) box.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
        if (!poolBoxes.length || typeof uPlot === 'undefined') return;
        const series = (state.pools && state.pools.series) || [];
        const from = isNum(s.from_ms) ? s.from_ms : state.pools && state.pools.from_ms;
        const to = isNum(s.to_ms) ? s.to_ms : state.pools && state.pools.to_ms;
        const axisColor = cssVar('--c-axis', '#666');
        const grid = cssVar('--c-grid', '#eee');
        const font = '11.5px ' + cssVar('--font', 'sans-serif');
        for (const box of poolBoxes) {
          const id = box.dataset.poolKind + ':' + box.dataset.poolName;
          const unit = box.dataset.unit;
          const pending = box.dataset.pendingUnit;
          const fields = [['max', 'max', unit, '--c-max'], ['active', unit === 'threads' ? 'busy' : 'in use', unit, '--c-rps'], ['pending', pending === 'tasks' ? 'queued' : 'waiting', pending, '--c-errs']];
          const have = fields.map(([f, label, u, c]) => [series.find((x) => x.metric === 'pool_' + f + ':' + id), label, u, c]).filter(([x]) => x);
          if (!have.length) { emptyBox(box, 'No figures in this range', 'The pool was not in the scrapes of this range.'); continue; }
          const times = Array.from(new Set(have.flatMap(([x]) => x.t_ms))).sort((a, b) => a - b);
          const cols = have.map(([x]) => { const m = new Map(x.t_ms.map((t, i) => [t, x.mean[i]])); return times.map((t) => (m.has(t) ? m.get(t) : null)); });
          const u = new uPlot({
            width: Math.max(200, box.clientWidth), height: Math.max(100, box.clientHeight - 34), ms: 1,
            cursor: { sync: { key: 'harrier-route' }, drag: { x: true, y: false, setScale: true } },
            scales: { x: { time: true, min: from, max: to }, y: { range: (p, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
            series: [{ label: 'Time', value: (p, v) => (isNum(v) ? fmt.ts(v) : '') }].concat(have.map(([, label, un, c]) => ({
              label, stroke: cssVar(c, '#888'), width: 1.5, points: { show: false }, value: (p, v) => (isNum(v) ? fmt.num(v, Number.isInteger(v) ? 0 : 1) + ' ' + un : NULL) }))),
            axes: [{ stroke: axisColor, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1, size: 4 },
              values: (p, splits, ai, space, incr) => splits.map((v) => (incr >= 86400e3 ? fmt.ts(v).slice(5, 10) : incr < 60e3 ? fmt.clock(v) : fmt.clock(v).slice(0, 5))) }, { stroke: axisColor, font, label: unit, labelSize: 18, size: 60, grid: { stroke: grid, width: 1 }, values: (p, sp) => sp.map((v) => fmt.num(v, 0)) }],
            hooks: { setScale: [(p, key) => { if (key === 'x') sync(p); }] },
          }, [times].concat(cols), box);
          state.charts.push(u);
        }
      }

      // ── steps: the route as Camel nests it, with each step's last-minute figures ──
      // Rebuilt whole at each scrape (a route's steps are few; the same shape gives the
      // same heights, so nothing jumps); a choice's branches sit side by side.
      const DENSE_STEPS = 24;
      let denseTree = false;
      const BRANCHING = new Set(['choice', 'multicast', 'doTry', 'loadBalance', 'recipientList']);
      function stepNode(row, children) {
        const tags = [];
        if (row.slowest) tags.push(h('span', { class: 'tag slow', title: 'The largest share of the route\'s self time in the last minute' }, 'slowest'));
        if (row.failing) tags.push(h('span', { class: 'tag bad', title: 'Failed exchanges in the last minute' }, 'failing'));
        if (row.gone) tags.push(h('span', { class: 'tag muted', title: 'Not in the agent\'s latest scrape (redeployed?)' }, 'gone'));
        const fig = (label, text, title) => h('div', { title }, h('dt', null, label), h('dd', null, nullable(text)));
        const share = isNum(row.self_share_pct) ? row.self_share_pct : 0;
        // Sizes go through CSSOM: the page's CSP refuses style attributes.
        const bar = h('span', { class: 'step-share-bar' });
        bar.style.width = Math.min(100, share).toFixed(1) + '%';
        const card = h('div', { class: 'step-card' },
          h('div', { class: 'step-head' },
            h('span', { class: 'step-kind' }, row.kind),
            row.destination ? h('code', { class: 'step-dest', title: row.destination }, row.destination) : null,
            h('span', { class: 'step-id', title: 'The step\'s id in the route' }, row.step),
            ...tags),
          h('dl', { class: 'step-figs' },
            fig('rate', isNum(row.throughput_per_s) ? fmt.num(row.throughput_per_s, row.throughput_per_s < 10 ? 2 : 1) + ' /s' : NULL, 'Exchanges through the step per second'),
            fig('errors', fmt.pct(row.error_pct), 'Failed / exchanges'),
            fig('mean', fmt.ms(row.mean_ms), 'Mean time per completed exchange, nested steps included'),
            fig('self', fmt.ms(row.self_ms), 'Mean time in the step itself, nested steps left out'),
            fig('max', fmt.ms(row.max_ms), 'Camel\'s MaxProcessingTime since the statistics were reset'),
            fig('inflight', inflightText(row.inflight), 'Exchanges in the step at the last scrape')),
          h('div', { class: 'step-share', title: fmt.num(share, 1) + ' % of the route\'s self time' },
            bar,
            h('span', { class: 'step-share-text' }, fmt.num(share, 0) + ' %')));
        const cls = ['step-node'];
        if (row.slowest) cls.push('slowest');
        if (row.failing) cls.push('failing');
        if (row.gone) cls.push('gone');
        const li = h('li', { class: cls.join(' '), 'data-step': row.step, role: 'treeitem', 'aria-level': String(row.level) }, card);
        if (children.length) {
          li.append(h('ol', { class: 'step-children' + (!denseTree && BRANCHING.has(row.kind) && children.length <= 4 ? ' branches' : ''), role: 'group' }, ...children));
        }
        return li;
      }
      function drawStepTree(view) {
        if (!stepTree) return;
        const rows = (view && view.steps) || [];
        if (!rows.length) {
          stepTree.replaceChildren(h('div', { class: 'empty' }, h('p', { class: 'empty-title' }, 'No steps read for this route'),
            h('p', null, 'The agent has no ManagedProcessor MBeans for it (Camel registers them unless JMX is set to routes only), or the first scrape is still to come.')));
          return;
        }
        denseTree = rows.length > DENSE_STEPS;
        const kids = new Map();
        for (const r of rows) {
          const k = r.parent || '';
          if (!kids.has(k)) kids.set(k, []);
          kids.get(k).push(r);
        }
        const build = (r) => stepNode(r, (kids.get(r.step) || []).map(build));
        const known = new Set(rows.map((r) => r.step));
        // Steps whose parent is not listed stay at the top rather than vanish.
        const top = rows.filter((r) => !r.parent || !known.has(r.parent));
        // Many steps: one line each, the figures' names once above them.
        const dense = denseTree;
        const legend = dense ? h('p', { class: 'hint step-legend' }, 'each step: rate · errors · mean · self · max · inflight · share of the route\'s self time') : null;
        stepTree.replaceChildren(...[legend, h('ol', { class: 'step-tree' + (dense ? ' dense' : ''), role: 'tree', 'aria-label': 'Steps of ' + data.route.route }, ...top.map(build))].filter(Boolean));
      }
      let stepSeq = 0;
      async function loadStepTree() {
        if (!stepTree || !data.steps_url) return;
        const mine = ++stepSeq;
        try {
          const res = await fetch(data.steps_url + '?window=1m', { headers: { Accept: 'application/json' } });
          const body = await res.json();
          if (mine !== stepSeq) return;
          if (!res.ok) throw new Error(body && body.error || 'HTTP ' + res.status);
          drawStepTree(body);
        } catch (err) {
          if (mine !== stepSeq) return;
          stepTree.replaceChildren(h('p', { class: 'hint bad' }, 'Could not load the steps: ' + String(err.message || err)));
        }
      }
      // ── steps under a run's load: each step's self time per load level, the step that gave way ──
      const runSelect = $('#steps-run');
      const wanted = new URLSearchParams(location.search).get('run');
      let shownRun = null;
      function fillRuns(runs) {
        if (!runSelect) return;
        const list = (runs || []).filter((r) => r.hit !== 'other').slice().sort((a, b) => b.started_at_ms - a.started_at_ms);
        if (wanted && !list.some((r) => String(r.id) === wanted)) list.unshift({ id: Number(wanted), name: 'run ' + wanted, started_at_ms: null });
        const keep = runSelect.value;
        runSelect.replaceChildren(...list.map((r) => h('option', { value: String(r.id) }, r.name + (isNum(r.started_at_ms) ? ' \u00b7 ' + fmt.ts(r.started_at_ms) : ''))));
        if (!list.length) {
          runSelect.disabled = true;
          $('#steps-load-sentence').textContent = 'No load-test run in the charts\' range loaded this route\'s service: widen the range, or run harrier load against it.';
          $('#steps-load-table').replaceChildren();
          shownRun = null;
          return;
        }
        runSelect.disabled = false;
        const pick = list.some((r) => String(r.id) === keep) ? keep : (wanted && list.some((r) => String(r.id) === wanted) ? wanted : String(list[0].id));
        runSelect.value = pick;
        if (pick !== shownRun) loadUnderLoad(pick);
      }
      async function loadUnderLoad(runId) {
        shownRun = runId;
        const sentence = $('#steps-load-sentence');
        const table = $('#steps-load-table');
        try {
          const res = await fetch(data.steps_url + '/under-load?run=' + encodeURIComponent(runId), { headers: { Accept: 'application/json' } });
          const v = await res.json();
          if (runId !== shownRun) return;
          if (!res.ok) throw new Error(v && v.error || 'HTTP ' + res.status);
          const g = v.gives_way;
          sentence.replaceChildren(...(g ? [h('strong', null, 'The step that gives way: '), g.sentence + '.'] : [v.note || 'No step gave way.']),
            v.run_statement ? h('span', { class: 'hint' }, ' The run: ' + v.run_statement + ' (', h('a', { href: v.run_url }, v.run_name), ').') : '');
          if (!v.levels.length) { table.replaceChildren(); return; }
          const unit = v.unit === 'users' ? ' users' : ' req/s';
          const giving = g ? v.levels.findIndex((l) => l.load === g.load) : -1;
          const head = h('tr', null, h('th', { scope: 'col' }, 'Step · self time, ms'), ...v.levels.map((l, i) => h('th', { scope: 'col', class: 'num' + (i === giving ? ' giving' : ''), title: fmt.num(l.seconds, 0) + ' s, ' + fmt.int(l.exchanges) + ' exchanges' }, fmt.num(l.load, l.load < 10 ? 1 : 0) + unit)));
          const nameCell = (s) => {
            const th = h('th', { scope: 'row' }, s.label, ' ', h('span', { class: 'hint' }, s.step));
            th.style.paddingLeft = (0.75 + (s.level - 1) * 1.1) + 'rem';
            return th;
          };
          const rows = v.steps.filter((s) => s.self_ms.some(isNum)).map((s) => h('tr', { class: g && s.step === g.step ? 'giving' : null },
            nameCell(s),
            ...s.self_ms.map((x, i) => h('td', { class: 'num' + (g && s.step === g.step && i >= giving ? ' bad' : ''), title: 'mean ' + fmt.ms(s.mean_ms[i]) + ' (nested steps included)' }, nullable(fmt.ms(x))))));
          table.replaceChildren(h('table', { class: 'data compact' }, h('thead', null, head), h('tbody', null, ...rows)));
        } catch (err) {
          if (runId !== shownRun) return;
          sentence.textContent = 'Could not read the steps under this run: ' + String(err.message || err);
          table.replaceChildren();
        }
      }
      if (runSelect) runSelect.addEventListener('change', () => loadUnderLoad(runSelect.value));

      // Most steps charted at once (the ones with the most self time), so the legend stays readable.
      const MAX_STEP_LINES = 8;
      function drawSteps(s) {
        if (!stepBox) return;
        stepBox.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
        const ss = state.steps || {};
        const t = ss.t_ms || [];
        if (typeof uPlot === 'undefined') return;
        const total = (x) => (x.self_ms || []).reduce((a, v) => a + (isNum(v) ? v : 0), 0);
        const lines = (ss.steps || []).filter((x) => total(x) > 0).sort((a, b) => total(b) - total(a)).slice(0, MAX_STEP_LINES);
        if (!t.length || !lines.length) { emptyBox(stepBox, 'No step figures in this range', 'Step times need two scrapes of the agent; pick a longer range or wait.'); return; }
        const axisColor = cssVar('--c-axis', '#666');
        const grid = cssVar('--c-grid', '#eee');
        const font = '11.5px ' + cssVar('--font', 'sans-serif');
        const palette = ['--c-p95', '--c-rps', '--c-users', '--c-mean', '--c-p99', '--c-capacity', '--c-p50', '--c-max'];
        const u = new uPlot({
          width: Math.max(200, stepBox.clientWidth), height: Math.max(100, stepBox.clientHeight - 34), ms: 1,
          cursor: { sync: { key: 'harrier-route' }, drag: { x: true, y: false, setScale: true } },
          scales: { x: { time: true, min: s.from_ms, max: s.to_ms }, y: { range: (p, min, max) => [0, max > 0 ? max * 1.1 : 1] } },
          series: [{ label: 'Time', value: (p, v) => (isNum(v) ? fmt.ts(v) : '') }].concat(lines.map((x, i) => ({
            label: x.label + ' (' + x.step + ')', stroke: cssVar(palette[i % palette.length], '#888'), width: 1.5, points: { show: false },
            value: (p, v) => (isNum(v) ? fmt.ms(v) : NULL) }))),
          axes: [{ stroke: axisColor, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1, size: 4 },
            values: (p, splits, ai, space, incr) => splits.map((v) => (incr >= 86400e3 ? fmt.ts(v).slice(5, 10) : incr < 60e3 ? fmt.clock(v) : fmt.clock(v).slice(0, 5))) },
          { stroke: axisColor, font, label: 'ms', labelSize: 18, size: 60, grid: { stroke: grid, width: 1 }, values: (p, sp) => sp.map((v) => fmt.num(v, v < 10 ? 1 : 0)) }],
          hooks: { setScale: [(p, key) => { if (key === 'x') sync(p); }] },
        }, [t].concat(lines.map((x) => (x.self_ms || []).map((v) => (isNum(v) ? v : null)))), stepBox);
        state.charts.push(u);
      }

      function draw() {
        for (const u of state.charts) u.destroy();
        state.charts = [];
        for (const box of Object.values(boxes)) box.querySelectorAll('.uplot, .chart-empty').forEach((n) => n.remove());
        const s = state.series || {};
        drawPools(s);
        drawSteps(s);
        fillRuns(s.runs);
        const t = s.t_ms || [];
        const list = $('#run-bands');
        if (list) {
          list.replaceChildren(...(s.runs || []).map((r) => h('li', null, h('a', { href: r.url }, r.name), ' ',
            h('span', { class: 'hint' }, fmt.ts(r.started_at_ms) + ' \u2013 ' + fmt.time(r.ended_at_ms)),
            r.hit === 'unknown'
              ? h('span', { class: 'hint', title: 'The run names no service and no address; tag it at import (--tag service=NAME) to place it' }, ' \u00b7 target unknown')
              : null)));
          if (!(s.runs || []).length) list.append(h('li', { class: 'hint' }, 'none'));
        }
        if (typeof uPlot === 'undefined') {
          for (const box of Object.values(boxes)) emptyBox(box, 'Chart library not loaded', 'static/vendor/uplot-*/uPlot.iife.min.js is missing.');
          return;
        }
        if (!t.length) {
          for (const box of Object.values(boxes)) emptyBox(box, 'No figures in this range', 'Rates need two scrapes of the target; pick a longer range or wait.');
          return;
        }
        const axisColor = cssVar('--c-axis', '#666');
        const grid = cssVar('--c-grid', '#eee');
        const font = '11.5px ' + cssVar('--font', 'sans-serif');
        const xAxis = { stroke: axisColor, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1, size: 4 },
          values: (u, splits, ai, space, incr) => splits.map((v) => (incr >= 86400e3 ? fmt.ts(v).slice(5, 10) : incr < 60e3 ? fmt.clock(v) : fmt.clock(v).slice(0, 5))) };
        // Whole-number tick steps for counts (an inflight axis must not read 0, 1, 1).
        const WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5];
        const yAxis = (label, f, extra) => Object.assign({ stroke: axisColor, font, label, labelSize: 18, size: 60, grid: { stroke: grid, width: 1 }, ticks: { show: false }, values: (u, sp) => sp.map(f) }, extra || {});
        const line = (label, color, f, extra) => Object.assign({ label, stroke: cssVar(color, '#888'), width: 1.5, points: { show: false },
          value: (u, v) => (isNum(v) ? f(v) : NULL) }, extra || {});
        const clean = (arr) => (arr || []).map((v) => (isNum(v) ? v : null));
        const hooks = { draw: [bandsHook(s.runs)].concat(marks ? [marks.draw] : []), setCursor: marks ? [marks.cursor] : [], setScale: [(u, key) => { if (key === 'x') sync(u); }] };
        function make(box, series, cols, axes, scales) {
          if (!box) return;
          const u = new uPlot({
            width: Math.max(200, box.clientWidth), height: Math.max(100, box.clientHeight - 34), ms: 1,
            cursor: { sync: { key: 'harrier-route' }, drag: { x: true, y: false, setScale: true } },
            scales: Object.assign({ x: { time: true, min: s.from_ms, max: s.to_ms } }, scales || {}),
            series: [{ label: 'Time', value: (u, v) => (isNum(v) ? fmt.ts(v) : '') }].concat(series),
            axes: [xAxis].concat(axes), hooks,
          }, [t].concat(cols), box);
          u.over.addEventListener('click', () => {
            const idx = u.cursor.idx;
            const ms = isNum(u.cursor.left) ? u.posToVal(u.cursor.left, 'x') : (idx !== null ? t[idx] : null);
            const run = isNum(ms) && runAt(s.runs, ms);
            if (run) location.href = run.url;
          });
          state.charts.push(u);
        }
        const zero = (u, min, max) => [0, max > 0 ? max * 1.1 : 1];
        make(boxes.throughput, [line('exchanges/s', '--c-rps', (v) => fmt.num(v, 2) + ' /s', { fill: cssVar('--c-rps-fill', 'transparent') })],
          [clean(s.throughput_per_s)], [yAxis('per second', (v) => fmt.num(v, v < 10 ? 1 : 0))], { y: { range: zero } });
        make(boxes.errors, [
          line('failed/s', '--c-errs', (v) => fmt.num(v, 2) + ' /s', { scale: 'y' }),
          line('error %', '--c-errpct', fmt.pct, { scale: 'pct', dash: [2, 2] }),
        ], [clean(s.errors_per_s), clean(s.error_pct)], [
          yAxis('failed / s', (v) => fmt.num(v, v < 10 ? 1 : 0)),
          yAxis('error %', (v) => fmt.num(v, 0) + ' %', { scale: 'pct', side: 1, grid: { show: false } }),
        ], { y: { range: zero }, pct: { range: (u, min, max) => [0, Math.min(100, Math.max(5, max * 1.15))] } });
        make(boxes.latency, [
          line('mean', '--c-mean', fmt.ms, { dash: [5, 3] }),
          line('p50', '--c-p50', fmt.ms), line('p95', '--c-p95', fmt.ms), line('p99', '--c-p99', fmt.ms),
          line('max', '--c-max', fmt.ms, { width: 1 }),
        ], [clean(s.mean_ms), clean(s.p50_ms), clean(s.p95_ms), clean(s.p99_ms), clean(s.max_ms)],
        [yAxis('ms', (v) => fmt.num(v, v < 10 ? 1 : 0))], { y: { range: zero } });
        make(boxes.inflight, [line('inflight', '--c-users', (v) => fmt.num(v, Number.isInteger(v) ? 0 : 1), { fill: cssVar('--c-users-fill', 'transparent') })],
          [clean(s.inflight)], [yAxis('exchanges', (v) => fmt.num(v, 0), { incrs: WHOLE })], { y: { range: zero } });
        const note = $('#series-note');
        if (note) note.textContent = (s.resolution === 'raw' ? 'per scrape' : s.resolution + ' rollups') + ' · step ' + fmt.duration(s.step_ms) + ' · live · drag to zoom, double-click to reset';
      }

      let seq = 0;
      async function load() {
        const mine = ++seq;
        const to = Date.now();
        const from = to - state.rangeMs;
        state.lastFetch = to;
        const pools = poolBoxes.length && data.pools && data.pools.instance !== null
          ? fetch(data.pools.series_url + '?from=' + Math.round(from) + '&to=' + to + '&instance=' + encodeURIComponent(data.pools.instance), { headers: { Accept: 'application/json' } })
            .then((r) => (r.ok ? r.json() : null)).catch(() => null)
          : Promise.resolve(null);
        const steps = stepBox && data.steps_series_url
          ? fetch(data.steps_series_url + '?from=' + Math.round(from) + '&to=' + to, { headers: { Accept: 'application/json' } })
            .then((r) => (r.ok ? r.json() : null)).catch(() => null)
          : Promise.resolve(null);
        try {
          const res = await fetch(data.series_url + '?from=' + Math.round(from) + '&to=' + to, { headers: { Accept: 'application/json' } });
          const body = await res.json();
          const poolBody = await pools;
          const stepBody = await steps;
          if (mine !== seq) return;
          if (!res.ok) throw new Error(body && body.error || 'HTTP ' + res.status);
          state.series = body;
          if (poolBody) state.pools = poolBody;
          if (stepBody) state.steps = stepBody;
          draw();
        } catch (err) {
          if (mine !== seq) return;
          for (const box of Object.values(boxes)) emptyBox(box, 'Could not load the time series', String(err.message || err));
        }
      }

      for (const btn of $$('button[data-range]')) {
        btn.addEventListener('click', () => {
          state.rangeMs = RANGES[btn.dataset.range] || 3600e3;
          for (const b of $$('button[data-range]')) b.setAttribute('aria-pressed', b === btn ? 'true' : 'false');
          load();
        });
      }

      function updateKpis(r) {
        const text = {
          throughput_per_s: fmt.rps(r.throughput_per_s), error_pct: fmt.pct(r.error_pct), mean_ms: fmt.ms(r.mean_ms),
          p95_ms: fmt.ms(r.p95_ms), max_ms: fmt.ms(r.max_ms), inflight: inflightText(r.inflight),
        };
        for (const kpi of $$('#route-kpis .kpi[data-key]')) {
          const v = text[kpi.dataset.key];
          if (v !== undefined) kpi.querySelector('.kpi-value').replaceChildren(nullable(v));
        }
        const badge = $('#route-state');
        if (badge) { badge.textContent = r.state; badge.className = 'badge ' + (STATE_CLASS[r.state] || 'warn'); }
        const since = $('#route-since');
        if (since) { since.dataset.value = dv(r.last_exchange_ms); since.replaceChildren(nullable(ago(r.last_exchange_ms))); }
      }

      // Route operations (operators, Jolokia routes only): confirm, POST, show the agent's
      // answer; the state badge takes the state the agent gave until the next scrape.
      const opResult = $('#route-op-result');
      for (const b of $$('button[data-route-op]')) {
        b.addEventListener('click', async () => {
          if (!window.confirm(b.dataset.confirm)) return;
          const buttons = $$('button[data-route-op]');
          for (const x of buttons) x.disabled = true;
          opResult.classList.remove('bad');
          opResult.textContent = b.textContent + '…';
          try {
            const res = await fetch('/api/v1/routes/' + data.route.id + '/operations/' + b.dataset.routeOp, { method: 'POST', headers: { Accept: 'application/json' } });
            const body = await res.json().catch(() => ({}));
            if (res.ok) {
              opResult.textContent = b.textContent + ': done; the agent says the route is ' + (body.state || 'in no stated state') + ' (' + new Date().toLocaleTimeString() + ')';
              const badge = $('#route-state');
              if (badge && body.state) { badge.textContent = body.state; badge.className = 'badge ' + (STATE_CLASS[body.state] || 'warn'); }
            } else {
              opResult.classList.add('bad');
              opResult.textContent = b.textContent + ' failed (HTTP ' + res.status + '): ' + (body.error || res.statusText);
            }
          } catch (e) {
            opResult.classList.add('bad');
            opResult.textContent = b.textContent + ' failed: ' + e.message;
          } finally {
            for (const x of buttons) x.disabled = false;
          }
        });
      }

      on('routes_updated', (msg) => {
        const r = msg && Array.isArray(msg.routes) && msg.routes.find((x) => x.id === data.route.id);
        if (!r) return;
        updateKpis(r);
        loadStepTree();
        const wait = 5000 - (Date.now() - state.lastFetch);
        clearTimeout(state.timer);
        state.timer = setTimeout(load, Math.max(0, wait));
      });
      on('resync', load);

      if ('ResizeObserver' in window) {
        let raf = 0;
        const ro = new ResizeObserver(() => {
          cancelAnimationFrame(raf);
          raf = requestAnimationFrame(() => {
            for (const u of state.charts) {
              const box = u.root.parentElement;
              if (box && box.clientWidth && box.clientWidth !== u.width) u.setSize({ width: box.clientWidth, height: u.height });
            }
          });
        });
        for (const box of Object.values(boxes).concat(poolBoxes, stepBox ? [stepBox] : [])) ro.observe(box);
      }
      draw();
      loadStepTree();
      if (stepBox) load();
      H.routes.page = { data, state, load, draw };
    }

    H.routes = { routeRow, sparkPoints };
    if (doc.body.dataset.page === 'routes') initRoutesPage();
    if (doc.body.dataset.page === 'route') initRoutePage();
  }

  // Deferred before harrier.js: wait for it (DOMContentLoaded fires after every deferred script).
  if (window.harrier) start();
  else doc.addEventListener('DOMContentLoaded', start);
})();
