/*!
 * harrier console — browser side. Plain ES2020, no build step, no network
 * beyond this server. Loaded with <script defer> on every page; uPlot
 * (static/vendor/uplot-1.6.32/) is loaded before it, with defer, on pages with
 * charts.
 *
 * ── What it does ───────────────────────────────────────────────────────────
 *  1. harrier.fmt — number/time formatting shared by every page, so a value
 *     added by JS reads exactly like the server-rendered one:
 *       int(1234567)      "1,234,567"          (en-US grouping)
 *       num(v, d)         v with exactly d decimals, grouped
 *       ms(3.45)          "3.5 ms"   (< 10 ms: up to 1 decimal)
 *       ms(123.4)         "123 ms"   (< 1,000 ms: integer)
 *       ms(1234)          "1.23 s"   (≥ 1,000 ms: seconds, 2 decimals)
 *       pct(12.3456)      "12.35 %"  (2 decimals, space before %)
 *       rps(1234.52)      "1,234.5 req/s" (1 decimal)
 *       bytes(12900000)   "12.3 MB"  (1024-based like JMeter's KB/s: B, KB, MB, GB, TB; 1 decimal, B integer)
 *       duration(62*60e3) "1 h 02 min"; 200e3 → "3 min 20 s"; < 60 s → ms(v) ("850 ms", "12.35 s")
 *       ts(ms)            "2026-11-30 14:02:33 CET" (browser local time, zone named)
 *       time(ms)          "14:02:33"
 *     null / undefined / NaN / ±Infinity → "–" (U+2013). The server renders
 *     the same "–" inside <span class="num-null">.
 *  2. Sortable tables: table.sortable > thead th[data-sort="num"|"text"].
 *     Header text is wrapped in <button class="sort">. Sorts tbody rows by the
 *     cell's data-value (fallback: textContent). Empty data-value, missing
 *     cell or "–" = null, always last. First click: num → descending,
 *     text → ascending; next click toggles. Sets aria-sort on the th
 *     (server may preset aria-sort to say how it already sorted the rows).
 *     tfoot is never sorted.
 *  3. Local time: every element with data-ts-ms="<unix ms>" gets its text set to
 *     fmt.ts (or fmt.time when data-ts-format="time") and a UTC title.
 *  4. Live: when <body data-live> is present, a websocket to
 *     ws(s)://<host>/api/v1/live with exponential backoff (1 s → 30 s, jitter).
 *     Every JSON message {type, …} is dispatched on document as
 *     CustomEvent('harrier:<type>', {detail: msg}). After a reconnect a
 *     synthetic {type:"resync", reason:"reconnected"} is dispatched, because
 *     messages may have been missed. #live-status shows the state
 *     (data-state = connecting | live | reconnecting).
 *  4b. Alerts on every page: span#alerts-badge (in the nav's Alerts entry, rendered
 *     by the server) shows the firing count, coloured by the highest severity
 *     (class sev-critical | sev-error | sev-warning | sev-info; hidden at 0); on
 *     harrier:alert_firing / alert_resolved / resync it is refetched from
 *     GET /api/v1/alerts. Each alert_firing / alert_resolved also shows a toast in
 *     div#toasts (fixed top-right, stacked, newest on top, at most 5, auto-dismissed
 *     after 8 s unless hovered, × to dismiss, a link to /console/alerts). The badge
 *     makes every page open the live socket (still one per page).
 *  5. Runs tables: any table#runs-table (Runs and Overview pages) follows
 *     harrier:run_imported / run_updated / run_deleted / resync (GET /api/v1/runs).
 *     run_updated {run: RunListItem} replaces the row in place and re-applies
 *     the current sort (a row not shown is added, except in a capped table).
 *     table[data-limit="N"] keeps at most N rows (Overview's "recent runs").
 *  6. Upload: form#upload-form (several files: one multipart body with a `file` field
 *     each, e.g. the CSVs of one Locust run) → POST /api/v1/runs?format=&name=&scenario= with
 *     the file as the raw body (XMLHttpRequest, upload progress; empty params
 *     and format=auto are omitted). The body has no name, so the request says
 *     Content-Disposition: attachment; filename="ascii"; filename*=UTF-8''pct
 *     and the server should use that file name as import_progress.source.
 *     Import progress from harrier:import_progress (source == file name, or
 *     ends with "/" + file name), then links (2xx {"runs":[…]}) or the
 *     {"error": "…"} text in an error box.
 *  7. Run page (body[data-page="run"]): charts from the JSON island
 *     script#run-data with uPlot: latency (p50 p90 p95 p99 max mean; max starts
 *     hidden, click the legend), throughput (requests/s, successful/s and errors/s = count /
 *     bucket seconds; error % on a right axis), users (stepped). Shared cursor;
 *     drag-zoom on one chart zooms all, double-click resets. The partial last
 *     bucket is shaded, labelled "partial", drawn dashed, and the legend's time
 *     says "(partial)". Empty series → an empty state inside each chart box;
 *     active_users all null → a note in the users box. select#ts-label
 *     refetches timeseries_url?label=… (and keeps ?label= in the page URL).
 *     Saturation (#run-data.capacity): dashed vertical lines at
 *     capacity.knee.at_ms ("knee · ~20 users", --c-capacity),
 *     capacity.latency_breach.at_ms ("p95 ×2 · 45 users", --c-p95) and
 *     capacity.error_breach.at_ms ("errors > 1 % · 61 users", --c-errs), each
 *     when present, on the three over-time charts, kept through zoom and label
 *     changes; labels stacked one row each.
 *     Chart colours come from the --c-* CSS properties; a colour-scheme switch
 *     redraws.
 *  7b. Distribution panel, all following select#ts-label:
 *     distribution — bars of GET distribution_url[?label=] bins (x response
 *       time ms, y samples); the last bin, when wider than the rest (open-ended,
 *       up to max), is drawn in --c-dist-tail and marked "max …". Hover: bin
 *       range, count, % and cumulative %.
 *     percentiles — curve.p/curve.ms on a "nines" axis x' = −log10(1 − p/100)
 *       (90 → 1, 99 → 2, 99.9 → 3, 99.99 → 4) and max (p100) at 4.5 so it does
 *       not sit on p99.99. Hover: "p99.9: 1.23 s".
 *     vs-users — from the over-time Series: seconds grouped by active users
 *       (partial last bucket left out; for a label, each second's level comes
 *       from the run's all-requests series in #run-data): req/s = mean count
 *       per second, p95 = median of the per-second p95 (right axis), error % =
 *       Σerrors / Σcount × 100 (second right axis); the same markers at
 *       knee.users, latency_breach.users, error_breach.users.
 *     Empty states: summary-only run, no samples (run or label), active_users
 *     all null, fetch error ({"error"} text).
 *  8. Run edit / delete: form#run-edit-form submit → PATCH /api/v1/runs/{id}
 *     with {"name", "scenario" (null if empty), "notes" (null if empty),
 *     "tags": {k: v}} (tags typed as "k=v, k=v"; a pair without "=" or an
 *     empty name is refused before sending). 2xx → the h1 / title (and any
 *     [data-run-field]) show the new values, the inputs show what the server
 *     stored, and a "Saved" callout; otherwise the {"error"} text in a callout.
 *     harrier:run_updated for this run updates the h1 too. button#run-delete →
 *     confirm() → DELETE /api/v1/runs/{id} → 2xx → location.href = '/console/runs'.
 *
 * ── DOM contract (templates must follow) ───────────────────────────────────
 *  body[data-page="overview"|"runs"|"run"|…], body[data-live] (presence)
 *  #live-status                         span in the top bar, hidden until JS runs
 *  table.data.sortable th[data-sort]    see 2.
 *  td[data-value] / td.num              raw value for sorting / right-aligned
 *  time[data-ts-ms][data-ts-format]     see 3.
 *  Runs: table#runs-table > tbody; tr[data-run-id]; #runs-empty (empty state,
 *        hidden when rows exist); .table-wrap containing the table is hidden
 *        when there are no rows; optional #runs-count (text "N runs").
 *        Row cells, in order (see runRow below for the exact HTML):
 *        name(link, + .badge.muted "summary" if summary_only) · scenario ·
 *        tool · start · duration · requests · error % · p95 · throughput
 *  Upload: form#upload-form with input[type=file][name=file],
 *        input[name=name], input[name=scenario], select[name=format],
 *        button[type=submit]; #upload-progress-row (hidden) containing
 *        progress#upload-progress and #upload-status; #upload-result.
 *  Run: script#run-data (application/json) = {run: {id, name, tool,
 *        summary_only, …}, timeseries: Series (all requests), timeseries_url,
 *        distribution_url: "/api/v1/runs/7/distribution",
 *        capacity: null | {knee, latency_breach, error_breach (each null |
 *        {users, at_ms, …}), statement, users, throughput_rps, at_ms, …}};
 *        div.chart[data-chart="latency"|"throughput"|"users"|"distribution"|
 *        "percentiles"|"vs-users"] (each optional; fixed heights in CSS);
 *        select#ts-label (value "" = all requests); optional #ts-note
 *        (text of Series.hdr_note). Optional .charts.cols-2 puts two chart
 *        cards side by side (.chart-card.span-2: a whole row).
 *        Edit: form#run-edit-form[data-run-id] with input[name=name],
 *        input[name=scenario], textarea[name=notes], input[name=tags] and a
 *        submit button; button#run-delete[data-run-id] (inside or outside the
 *        form); optional #run-edit-result (callouts; made after the form if
 *        missing); optional #run-name (the name inside the h1; else the h1's
 *        first text node is replaced); optional [data-run-field="name"|
 *        "scenario"|"notes"|"tags"] elements re-rendered after a save.
 *
 *  Everything is exposed as window.harrier for templates and tests.
 */
(() => {
  'use strict';

  const NULL_TEXT = '\u2013';
  const doc = document;

  // ── 1. formatting ─────────────────────────────────────────────────────
  const nfCache = new Map();
  /** Intl.NumberFormat en-US with exactly `min`..`max` fraction digits (cached). */
  function nf(min, max) {
    const key = min + ':' + max;
    let f = nfCache.get(key);
    if (!f) {
      f = new Intl.NumberFormat('en-US', { minimumFractionDigits: min, maximumFractionDigits: max });
      nfCache.set(key, f);
    }
    return f;
  }
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const pad2 = (n) => String(n).padStart(2, '0');

  /** The browser's short name of its time zone at `d` ("UTC", "CET", "GMT+2"); '' if unknown. */
  function zoneName(d) {
    try {
      const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((p) => p.type === 'timeZoneName');
      return part ? part.value : '';
    } catch (_) {
      return '';
    }
  }

  const fmt = {
    NULL: NULL_TEXT,
    /** Integer with thousands separators: 1234567 → "1,234,567". */
    int(v) { return isNum(v) ? nf(0, 0).format(v) : NULL_TEXT; },
    /** Fixed decimals with separators: num(1234.5, 2) → "1,234.50". */
    num(v, d = 1) { return isNum(v) ? nf(d, d).format(v) : NULL_TEXT; },
    /** Response time: "3.5 ms", "123 ms", "1.23 s". */
    ms(v) {
      if (!isNum(v)) return NULL_TEXT;
      const a = Math.abs(v);
      if (a < 10) return nf(0, 1).format(v) + ' ms';
      if (Math.round(a) < 1000) return nf(0, 0).format(v) + ' ms';
      return nf(2, 2).format(v / 1000) + ' s';
    },
    /** Percentage of 100: 12.3456 → "12.35 %". */
    pct(v) { return isNum(v) ? nf(2, 2).format(v) + ' %' : NULL_TEXT; },
    /** Throughput: "1,234.5 req/s". */
    rps(v) { return isNum(v) ? nf(1, 1).format(v) + ' req/s' : NULL_TEXT; },
    /** Bytes, 1024-based (like JMeter's KB/s): "512 B", "12.3 MB". */
    bytes(v) {
      if (!isNum(v)) return NULL_TEXT;
      const units = ['B', 'KB', 'MB', 'GB', 'TB'];
      let i = 0;
      let x = v;
      while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
      return (i === 0 ? nf(0, 0).format(x) : nf(1, 1).format(x)) + ' ' + units[i];
    },
    /** Bytes per second: "12.3 KB/s". */
    bytesRate(v) { return isNum(v) ? fmt.bytes(v) + '/s' : NULL_TEXT; },
    /** Duration: "850 ms", "12.35 s", "3 min 20 s", "1 h 02 min". */
    duration(v) {
      if (!isNum(v)) return NULL_TEXT;
      if (Math.abs(v) < 60000) return fmt.ms(v);
      const totalS = Math.round(v / 1000);
      if (totalS < 3600) return Math.floor(totalS / 60) + ' min ' + pad2(totalS % 60) + ' s';
      const totalMin = Math.round(v / 60000);
      return nf(0, 0).format(Math.floor(totalMin / 60)) + ' h ' + pad2(totalMin % 60) + ' min';
    },
    /**
     * Local timestamp with the zone named, "2026-11-30 14:02:33 CET" — the one format of
     * absolute times in the console (the server renders the same shape in UTC before
     * this script runs; the API answers unix ms, titles give ISO 8601 UTC).
     */
    ts(v) {
      if (!isNum(v)) return NULL_TEXT;
      const d = new Date(v);
      return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + fmt.time(v);
    },
    /** Local time of day with the zone named, "14:02:33 CET". */
    time(v) {
      if (!isNum(v)) return NULL_TEXT;
      const zone = zoneName(new Date(v));
      return fmt.clock(v) + (zone ? ' ' + zone : '');
    },
    /** Local time of day alone, "14:02:33": chart axis ticks (the hover names the zone). */
    clock(v) {
      if (!isNum(v)) return NULL_TEXT;
      const d = new Date(v);
      return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
    },
    /** ISO-8601 UTC, used as a title for local timestamps. */
    isoUtc(v) { return isNum(v) ? new Date(v).toISOString().replace('.000Z', 'Z') : ''; },
  };

  // ── small DOM helpers ─────────────────────────────────────────────────
  const $ = (sel, root = doc) => root.querySelector(sel);
  const $$ = (sel, root = doc) => Array.from(root.querySelectorAll(sel));
  /** h('td', {class: 'num', 'data-value': 3}, 'text', node…) */
  function h(tag, attrs, ...children) {
    const el = doc.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }
  /** A formatted value or <span class="num-null">–</span>. */
  function valueNode(text) {
    return text === NULL_TEXT ? h('span', { class: 'num-null' }, NULL_TEXT) : text;
  }
  const emit = (type, detail) => doc.dispatchEvent(new CustomEvent('harrier:' + type, { detail }));
  const on = (type, fn) => doc.addEventListener('harrier:' + type, (e) => fn(e.detail));

  // ── 2. sortable tables ────────────────────────────────────────────────
  const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

  function cellKey(row, idx, type) {
    const td = row.cells[idx];
    if (!td) return null;
    const raw = td.hasAttribute('data-value') ? td.getAttribute('data-value') : td.textContent.trim();
    if (raw === '' || raw === NULL_TEXT) return null;
    if (type === 'num') {
      const n = Number(raw);
      return Number.isFinite(n) ? n : null;
    }
    return raw;
  }

  /**
   * Sort table's first tbody by column `idx` ('num'|'text', 'ascending'|'descending').
   * Nulls always last; ties keep their current order (stable sort).
   */
  function sortTable(table, idx, type, dir) {
    const tbody = table.tBodies[0];
    if (!tbody) return;
    const sign = dir === 'ascending' ? 1 : -1;
    // a total row left in tbody (tr.total) stays at the bottom; prefer <tfoot>
    const all = Array.from(tbody.rows);
    const pinned = all.filter((r) => r.classList.contains('total'));
    const rows = all.filter((r) => !r.classList.contains('total')).map((r) => ({ r, k: cellKey(r, idx, type) }));
    rows.sort((a, b) => {
      if (a.k === null || b.k === null) return (a.k === null) - (b.k === null);
      const c = type === 'num' ? a.k - b.k : collator.compare(a.k, b.k);
      return c * sign;
    });
    const frag = doc.createDocumentFragment();
    for (const x of rows) frag.append(x.r);
    for (const r of pinned) frag.append(r);
    tbody.append(frag);
    for (const th of table.tHead ? table.tHead.rows[0].cells : []) {
      if (th.cellIndex === idx) th.setAttribute('aria-sort', dir);
      else th.removeAttribute('aria-sort');
    }
    table._hrSort = { idx, type, dir };
  }

  /** Re-apply the table's current sort (after rows were added). */
  function resort(table) {
    const s = table._hrSort;
    if (s) sortTable(table, s.idx, s.type, s.dir);
  }

  function initSortable(table) {
    if (table._hrSortInit || !table.tHead) return;
    table._hrSortInit = true;
    for (const th of $$('th[data-sort]', table.tHead)) {
      const type = th.dataset.sort === 'num' ? 'num' : 'text';
      const label = h('span', { class: 'sort-label' });
      while (th.firstChild) label.append(th.firstChild);
      th.append(h('button', { type: 'button', class: 'sort' }, label));
      const btn = th.firstChild;
      const preset = th.getAttribute('aria-sort');
      if (preset === 'ascending' || preset === 'descending') {
        table._hrSort = { idx: th.cellIndex, type, dir: preset };
      }
      btn.addEventListener('click', () => {
        const cur = th.getAttribute('aria-sort');
        const dir = cur ? (cur === 'ascending' ? 'descending' : 'ascending')
                        : (type === 'num' ? 'descending' : 'ascending');
        sortTable(table, th.cellIndex, type, dir);
      });
    }
  }

  // ── 3. local time ─────────────────────────────────────────────────────
  function localizeTimes(root = doc) {
    for (const el of $$('[data-ts-ms]', root)) {
      const v = Number(el.getAttribute('data-ts-ms'));
      if (!Number.isFinite(v) || el.getAttribute('data-ts-ms') === '') continue;
      el.textContent = el.dataset.tsFormat === 'time' ? fmt.time(v) : fmt.ts(v);
      if (!el.title) el.title = fmt.isoUtc(v);
      if (el.tagName === 'TIME' && !el.hasAttribute('datetime')) el.setAttribute('datetime', fmt.isoUtc(v));
    }
  }

  // ── 4. live websocket ─────────────────────────────────────────────────
  const live = {
    state: 'off',
    socket: null,
    /** Dispatch a message as if it came from the server (tests, mocks). */
    inject(msg) { if (msg && typeof msg.type === 'string') emit(msg.type, msg); },
  };

  function startLive() {
    const indicator = $('#live-status');
    const url = (location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/api/v1/live';
    let attempt = 0;
    let timer = null;
    let everOpen = false;

    function setState(state, title) {
      live.state = state;
      if (!indicator) return;
      indicator.hidden = false;
      indicator.dataset.state = state;
      indicator.textContent = state === 'live' ? 'Live' : state === 'reconnecting' ? 'Reconnecting\u2026' : 'Connecting\u2026';
      indicator.title = title || (state === 'live' ? 'Receiving live updates' : '');
    }

    function connect() {
      clearTimeout(timer);
      timer = null;
      setState(everOpen || attempt ? 'reconnecting' : 'connecting');
      let ws;
      try {
        ws = new WebSocket(url);
      } catch (_) {
        schedule();
        return;
      }
      live.socket = ws;
      ws.onopen = () => {
        attempt = 0;
        setState('live');
        if (everOpen) emit('resync', { type: 'resync', reason: 'reconnected' });
        everOpen = true;
      };
      ws.onmessage = (ev) => {
        let msg;
        try { msg = JSON.parse(ev.data); } catch (_) { return; }
        if (msg && typeof msg.type === 'string') emit(msg.type, msg);
      };
      ws.onclose = () => {
        if (live.socket === ws) live.socket = null;
        schedule();
      };
      ws.onerror = () => { /* a close event follows */ };
    }

    function schedule() {
      if (timer) return;
      attempt++;
      const base = Math.min(30000, 1000 * 2 ** Math.min(attempt - 1, 5));
      const delay = Math.round(base / 2 + Math.random() * base / 2);
      setState('reconnecting', 'Connection lost; retrying in ' + Math.ceil(delay / 1000) + ' s');
      timer = setTimeout(connect, delay);
    }

    // come back quickly when the network or the tab does
    window.addEventListener('online', () => { if (!live.socket) connect(); });
    doc.addEventListener('visibilitychange', () => {
      if (doc.visibilityState === 'visible' && !live.socket && timer) connect();
    });
    connect();
  }

  // ── 4b. alerts: nav badge and toasts (every page) ─────────────────────
  const SEV_RANK = { critical: 3, page: 3, emergency: 3, fatal: 3, disaster: 3, error: 2, high: 2, major: 2, warning: 1, warn: 1, medium: 1, minor: 1 };
  const SEV_CLASS = ['sev-info', 'sev-warning', 'sev-error', 'sev-critical'];
  const sevRank = (s) => SEV_RANK[String(s || '').toLowerCase()] || 0;
  const sevClass = (s) => SEV_CLASS[sevRank(s)];
  const TOAST_MS = 8000;
  const TOASTS_MAX = 5;

  /** Sets #alerts-badge from GET /api/v1/alerts items: firing alerts no silence mutes,
   *  highest severity (as the server renders it). */
  function setBadge(alerts) {
    const badge = $('#alerts-badge');
    if (!badge || !Array.isArray(alerts)) return;
    const firing = alerts.filter((a) => a && a.state === 'firing'
      && !(Array.isArray(a.silenced_by) && a.silenced_by.length));
    const rank = firing.reduce((m, a) => Math.max(m, sevRank(a.severity)), 0);
    badge.textContent = String(firing.length);
    badge.dataset.count = String(firing.length);
    badge.className = 'nav-badge ' + SEV_CLASS[rank];
    badge.title = firing.length + ' firing';
    badge.hidden = firing.length === 0;
  }

  let badgeTimer = null;
  /** Refetches the alerts for the badge (debounced: a round can fire many at once). */
  function refreshBadge() {
    clearTimeout(badgeTimer);
    badgeTimer = setTimeout(async () => {
      try {
        const res = await fetch('/api/v1/alerts', { headers: { Accept: 'application/json' } });
        if (res.ok) setBadge(await res.json());
      } catch (_) { /* the next event or resync tries again */ }
    }, 150);
  }

  /** What an alert is about, in a few words: "/checkout · orders", "run 12". */
  function alertSubject(labels) {
    const l = labels || {};
    if (l.run && !l.route) return (l.run_name || 'run ' + l.run) + (l.scenario ? ' \u00b7 ' + l.scenario : '');
    if (l.route) return l.route + (l.service ? ' \u00b7 ' + l.service : '');
    return Object.keys(l).filter((k) => k !== 'alertname').map((k) => k + '=' + l[k]).join(' ');
  }

  /**
   * A toast for an alert_firing / alert_resolved message: top-right, stacked (at most
   * 5, oldest dropped), dismissed after 8 s (held while hovered or focused) or by its
   * × button; it links to /console/alerts. Fixed position: the page never moves.
   */
  function alertToast(msg) {
    const box = $('#toasts');
    const a = msg && msg.alert;
    if (!box || !a) return null;
    const resolved = msg.type === 'alert_resolved';
    const close = h('button', { type: 'button', class: 'toast-close', 'aria-label': 'Dismiss' }, '\u00d7');
    const el = h('div', { class: 'toast ' + (resolved ? 'is-resolved' : sevClass(a.severity)), 'data-rule': a.rule, 'data-change': resolved ? 'resolved' : 'firing' },
      h('div', { class: 'toast-head' },
        h('span', { class: 'sev-chip ' + (resolved ? 'sev-ok' : sevClass(a.severity)) }, resolved ? 'resolved' : (a.severity || 'alert')),
        h('strong', { class: 'toast-rule', title: a.rule }, a.rule),
        close),
      h('div', { class: 'toast-body' }, a.summary || alertSubject(a.labels)),
      h('div', { class: 'toast-foot' },
        h('span', { class: 'hint' }, (resolved ? 'resolved ' : 'fired ') + fmt.time(resolved ? msg.resolved_at_ms : (a.fired_at_ms || a.active_since_ms)) +
          (a.summary ? ' \u00b7 ' + alertSubject(a.labels) : '') + (msg.silenced ? ' \u00b7 silenced, not notified' : '')),
        h('a', { href: '/console/alerts', class: 'toast-link' }, 'Alerts \u2192')));
    let timer = null;
    const dismiss = () => { clearTimeout(timer); el.remove(); };
    const arm = () => { clearTimeout(timer); timer = setTimeout(dismiss, TOAST_MS); };
    close.addEventListener('click', dismiss);
    el.addEventListener('mouseenter', () => clearTimeout(timer));
    el.addEventListener('mouseleave', arm);
    el.addEventListener('focusin', () => clearTimeout(timer));
    box.prepend(el);
    while (box.children.length > TOASTS_MAX) box.lastElementChild.remove();
    arm();
    return el;
  }

  function initAlertsUi() {
    on('alert_firing', (msg) => { alertToast(msg); refreshBadge(); });
    on('alert_resolved', (msg) => { alertToast(msg); refreshBadge(); });
    on('resync', refreshBadge);
    initOverviewNow();
  }

  /**
   * The overview's "Alerts" and "In trouble" panels are server-rendered; on an alert
   * event, a resync, and every 15 s while the tab is visible, the page is refetched and
   * the two panels' contents swapped in place (their size may change; nothing above them
   * moves).
   */
  function initOverviewNow() {
    const ids = ['#overview-alerts', '#overview-trouble'];
    if (!$(ids[0])) return;
    let timer = null;
    let busy = false;
    async function refresh() {
      if (busy) return;
      busy = true;
      try {
        const res = await fetch(location.pathname + location.search, { headers: { Accept: 'text/html' } });
        if (!res.ok) return;
        const next = new DOMParser().parseFromString(await res.text(), 'text/html');
        for (const sel of ids) {
          const cur = $(sel);
          const fresh = $(sel, next);
          if (cur && fresh) cur.replaceChildren(...Array.from(fresh.childNodes).map((n) => doc.adoptNode(n)));
        }
      } catch (_) { /* the next event or tick tries again */ } finally {
        busy = false;
      }
    }
    const soon = () => { clearTimeout(timer); timer = setTimeout(refresh, 300); };
    on('alert_firing', soon);
    on('alert_resolved', soon);
    on('resync', soon);
    setInterval(() => { if (doc.visibilityState === 'visible') refresh(); }, 15000);
  }

  // ── 5. runs tables ────────────────────────────────────────────────────
  const TOOL_NAMES = {
    jmeter: 'JMeter', gatling: 'Gatling', k6: 'k6', ab: 'ab', locust: 'Locust',
    soapui: 'SoapUI', wrk: 'wrk', vegeta: 'Vegeta', artillery: 'Artillery', taurus: 'Taurus',
    hey: 'hey', oha: 'oha', autocannon: 'autocannon', siege: 'siege',
  };
  const toolName = (t) => (t && TOOL_NAMES[String(t).toLowerCase()]) || t || NULL_TEXT;

  /** data-value text for a possibly-null number. */
  const dv = (v) => (isNum(v) ? String(v) : '');

  /**
   * One runs-table row, identical to the server's:
   * <tr data-run-id="7">
   *   <td class="name" data-value="NAME"><a href="URL">NAME</a>[ <span class="badge muted" title="…">summary</span>]</td>
   *   <td data-value="SCENARIO|''">SCENARIO|<span class="num-null">–</span></td>
   *   <td data-value="jmeter">JMeter</td>
   *   <td class="num" data-value="STARTED_MS|''"><time data-ts-ms="STARTED_MS">2026-11-30 14:02:33</time></td>
   *   <td class="num" data-value="DURATION_MS|''">fmt.duration</td>
   *   <td class="num" data-value="COUNT">fmt.int</td>
   *   <td class="num[ bad]" data-value="ERROR_PCT|''">fmt.pct</td>       (bad when error_pct > 0)
   *   <td class="num" data-value="P95_MS|''">fmt.ms</td>
   *   <td class="num" data-value="THROUGHPUT_RPS|''">fmt.rps</td>
   * </tr>
   */
  function runRow(run) {
    const nameCell = h('td', { class: 'name', 'data-value': run.name || '' },
      h('a', { href: run.url || '/console/runs/' + run.id }, run.name || '#' + run.id));
    if (run.status === 'live') {
      nameCell.append(' ', h('span', { class: 'badge info dot', title: 'Being streamed in now; its figures grow until it completes' }, 'live'));
    }
    if (run.summary_only && !run.has_series) {
      nameCell.append(' ', h('span', { class: 'badge muted', title: 'Only aggregate figures reported by the tool; no per-sample data' }, 'summary'));
    }
    const start = isNum(run.started_at_ms)
      ? h('time', { 'data-ts-ms': run.started_at_ms, datetime: fmt.isoUtc(run.started_at_ms), title: fmt.isoUtc(run.started_at_ms) }, fmt.ts(run.started_at_ms))
      : valueNode(NULL_TEXT);
    const bad = isNum(run.error_pct) && run.error_pct > 0;
    return h('tr', { 'data-run-id': run.id },
      nameCell,
      h('td', { 'data-value': run.scenario || '', title: run.scenario || null }, valueNode(run.scenario || NULL_TEXT)),
      h('td', { 'data-value': run.tool || '' }, toolName(run.tool)),
      h('td', { class: 'num', 'data-value': dv(run.started_at_ms) }, start),
      h('td', { class: 'num', 'data-value': dv(run.duration_ms) }, valueNode(fmt.duration(run.duration_ms))),
      h('td', { class: 'num', 'data-value': dv(run.count) }, valueNode(run.count > 0 ? fmt.int(run.count) : NULL_TEXT)),
      h('td', { class: bad ? 'num bad' : 'num', 'data-value': dv(run.error_pct) }, valueNode(fmt.pct(run.error_pct))),
      h('td', { class: 'num', 'data-value': dv(run.p95_ms) }, valueNode(fmt.ms(run.p95_ms))),
      h('td', { class: 'num', 'data-value': dv(run.throughput_rps) }, valueNode(fmt.rps(run.throughput_rps))),
      h('td', { class: 'num', 'data-value': dv(run.successful_rps) }, valueNode(fmt.rps(run.successful_rps))),
      capacityCell(run),
    );
  }

  /** The runs table's Capacity cell: a ramp's stated capacity at its users, a search's answer. */
  function capacityCell(run) {
    const td = h('td', { class: 'num capacity', 'data-value': dv(run.capacity_rps) }, valueNode(fmt.rps(run.capacity_rps)));
    if (isNum(run.capacity_rps)) {
      const note = isNum(run.capacity_users) ? 'at ' + fmt.int(run.capacity_users) + ' users'
        : (run.tool === 'harrier' ? 'search' : '');
      if (note) td.append(' ', h('span', { class: 'hint' }, note));
    }
    return td;
  }

  function initRunsTable(table) {
    const tbody = table.tBodies[0] || table.appendChild(h('tbody'));
    const wrap = table.closest('.table-wrap');
    const empty = $('#runs-empty');
    const countEl = $('#runs-count');
    const limit = Number(table.dataset.limit) || 0;

    function refreshEmpty() {
      const n = tbody.rows.length;
      if (empty) empty.hidden = n > 0;
      if (wrap) wrap.hidden = n === 0;
      if (countEl) countEl.textContent = fmt.int(n) + (n === 1 ? ' run' : ' runs');
    }
    function trim() {
      if (!limit) return;
      while (tbody.rows.length > limit) tbody.rows[tbody.rows.length - 1].remove();
    }
    const findRow = (id) => $$('tr[data-run-id]', tbody).find((r) => r.dataset.runId === String(id));

    on('run_imported', (msg) => {
      const run = msg && msg.run;
      if (!run || run.id === undefined) return;
      const old = findRow(run.id);
      if (old) old.remove();
      const tr = runRow(run);
      // a run just imported goes first, whatever its start time (a file from last week
      // would otherwise land out of sight); the next sort puts it in its place
      tbody.prepend(tr);
      trim();
      if (tr.isConnected) {
        tr.classList.add('row-new');
        tr.addEventListener('animationend', () => tr.classList.remove('row-new'), { once: true });
      }
      refreshEmpty();
    });
    on('run_updated', (msg) => {
      const run = msg && msg.run;
      if (!run || run.id === undefined) return;
      const old = findRow(run.id);
      // not shown: a capped table (recent runs) does not take in older runs; a full one does
      if (!old && limit) return;
      const tr = runRow(run);
      if (old) old.replaceWith(tr); else tbody.append(tr);
      resort(table);
      trim();
      refreshEmpty();
    });
    on('run_deleted', (msg) => {
      const tr = msg && findRow(msg.id);
      if (tr) tr.remove();
      refreshEmpty();
    });
    let resyncSeq = 0;
    on('resync', async () => {
      const seq = ++resyncSeq;
      try {
        const res = await fetch('/api/v1/runs', { headers: { Accept: 'application/json' } });
        if (!res.ok) throw new Error('HTTP ' + res.status);
        const body = await res.json();
        if (seq !== resyncSeq || !body || !Array.isArray(body.runs)) return;
        const frag = doc.createDocumentFragment();
        for (const run of body.runs) frag.append(runRow(run));
        tbody.replaceChildren(frag);
        resort(table);
        trim();
        refreshEmpty();
      } catch (err) {
        console.warn('harrier: resync failed', err);
      }
    });
    refreshEmpty();
  }

  // ── 6. upload ─────────────────────────────────────────────────────────
  const MB = 1024 * 1024;
  const fmtMB = (b) => nf(1, 1).format(b / MB) + ' MB';

  function initUpload(form) {
    const fileInput = form.querySelector('input[type="file"][name="file"]');
    const button = form.querySelector('button[type="submit"], input[type="submit"]');
    const bar = $('#upload-progress');
    const row = $('#upload-progress-row') || bar; // older markup: a bare <progress hidden>
    const status = $('#upload-status');
    let result = $('#upload-result');
    if (!result) { // never lose an error message for want of a container
      result = h('div', { id: 'upload-result', class: 'upload-result', hidden: true });
      form.after(result);
    }
    let busy = false;
    let fileName = null;
    let phase = 'idle';        // 'upload' (bytes going up) → 'import' (server still parsing)
    let uploadText = '';
    let samplesSeen = null;    // latest progress text for our file ("12.3 MB parsed")

    const setStatus = (text) => { if (status) status.textContent = text; };
    function showResult(node) {
      if (!result) return;
      result.replaceChildren(node);
      result.hidden = false;
    }
    function done() {
      busy = false;
      fileName = null;
      phase = 'idle';
      samplesSeen = null;
      if (button) button.disabled = false;
      form.removeAttribute('aria-busy');
    }

    // imports announce progress by source name; ours is the file's name
    on('import_progress', (msg) => {
      if (!busy || !msg || typeof msg.source !== 'string') return;
      if (msg.source !== fileName && !msg.source.endsWith('/' + fileName)) return;
      // the server reports bytes parsed (and samples, when it knows them)
      samplesSeen = isNum(msg.samples) ? fmt.int(msg.samples) + ' samples'
        : isNum(msg.bytes_read) ? fmtMB(msg.bytes_read) + ' parsed' : null;
      if (samplesSeen === null) return;
      if (phase === 'upload') {
        // the server parses while bytes arrive: keep the upload bar, add the count
        setStatus(uploadText + ' \u00b7 ' + samplesSeen);
        return;
      }
      let text = 'Importing\u2026 ' + samplesSeen;
      if (bar && isNum(msg.bytes_total) && msg.bytes_total > 0 && isNum(msg.bytes_read)) {
        bar.max = msg.bytes_total;
        bar.value = msg.bytes_read;
      } else if (bar) {
        bar.removeAttribute('value'); // indeterminate: total unknown
      }
      setStatus(text);
    });

    // drag & drop a file anywhere on the form
    form.addEventListener('dragover', (e) => { e.preventDefault(); form.classList.add('is-dragover'); });
    form.addEventListener('dragleave', () => form.classList.remove('is-dragover'));
    form.addEventListener('drop', (e) => {
      e.preventDefault();
      form.classList.remove('is-dragover');
      if (e.dataTransfer && e.dataTransfer.files.length && fileInput) fileInput.files = e.dataTransfer.files;
    });

    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (busy) return;
      const files = fileInput && fileInput.files ? Array.from(fileInput.files) : [];
      const file = files[0];
      if (!file) {
        showResult(h('div', { class: 'callout warn', role: 'alert' }, h('strong', null, 'No file'), h('span', null, 'Choose a results file (JTL/CSV, Gatling simulation.log, k6 JSON, …) first.')));
        if (fileInput) fileInput.focus();
        return;
      }
      const params = new URLSearchParams();
      for (const key of ['format', 'name', 'scenario']) {
        const el = form.elements.namedItem(key);
        const v = el && typeof el.value === 'string' ? el.value.trim() : '';
        if (v && !(key === 'format' && v === 'auto')) params.set(key, v);
      }
      const qs = params.toString();
      const url = (form.dataset.endpoint || '/api/v1/runs') + (qs ? '?' + qs : '');

      busy = true;
      // Several files (e.g. the _stats, _stats_history, _failures and _exceptions CSVs of
      // one Locust run) go as one multipart upload with a `file` field each.
      const label = files.length > 1 ? files.length + ' files' : file.name;
      const size = files.reduce((n, f) => n + f.size, 0);
      fileName = file.name;
      phase = 'upload';
      samplesSeen = null;
      if (button) button.disabled = true;
      form.setAttribute('aria-busy', 'true');
      if (result) { result.hidden = true; result.replaceChildren(); }
      if (row) row.hidden = false;
      if (bar) { bar.max = size || 1; bar.value = 0; }
      setStatus('Uploading ' + label + '\u2026 0.0 MB of ' + fmtMB(size) + ' (0 %)');

      const xhr = new XMLHttpRequest();
      xhr.open('POST', url);
      xhr.setRequestHeader('Accept', 'application/json');
      let body = file;
      if (files.length > 1) {
        body = new FormData();
        for (const f of files) body.append('file', f, f.name);
      } else {
        xhr.setRequestHeader('Content-Type', 'application/octet-stream');
        // the raw body has no name: tell the server, so import_progress.source can match it
        xhr.setRequestHeader('Content-Disposition', contentDisposition(file.name));
      }
      xhr.upload.onprogress = (ev) => {
        const total = ev.lengthComputable ? ev.total : size;
        if (bar && total) { bar.max = total; bar.value = ev.loaded; }
        const pctText = total ? ' (' + Math.floor(100 * ev.loaded / total) + ' %)' : '';
        uploadText = 'Uploading ' + label + '\u2026 ' + fmtMB(ev.loaded) + ' of ' + fmtMB(total) + pctText;
        setStatus(uploadText + (samplesSeen !== null ? ' \u00b7 ' + samplesSeen : ''));
      };
      xhr.upload.onload = () => {
        phase = 'import';
        if (bar) bar.removeAttribute('value');
        setStatus(samplesSeen !== null ? 'Importing\u2026 ' + samplesSeen : 'Importing\u2026');
      };
      xhr.onerror = () => {
        done();
        if (row) row.hidden = true;
        showResult(errorBox('Upload failed', 'The connection to the server was lost. Check that harrier is running, then try again.'));
      };
      xhr.onload = () => {
        let answer = null;
        try { answer = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
        done();
        if (row) row.hidden = true;
        if (xhr.status >= 200 && xhr.status < 300 && answer && Array.isArray(answer.runs)) {
          showResult(successBox(files.map((f) => f.name).join(', '), answer.runs));
          form.reset();
        } else {
          const msg = (answer && answer.error) || ('HTTP ' + xhr.status + ' ' + (xhr.statusText || ''));
          showResult(errorBox('Import failed', msg));
        }
      };
      xhr.send(body);
    });
  }

  /** RFC 6266 header naming the uploaded file: ASCII fallback + UTF-8 filename*. */
  function contentDisposition(name) {
    const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
    const utf8 = encodeURIComponent(name).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
    return 'attachment; filename="' + ascii + '"; filename*=UTF-8\'\'' + utf8;
  }

  function errorBox(title, message) {
    return h('div', { class: 'callout err', role: 'alert' }, h('strong', null, title), h('span', { class: 'msg' }, message));
  }

  function successBox(fileName, runs) {
    const list = h('ul');
    let rejected = 0;
    for (const r of runs) {
      rejected += isNum(r.rejected_rows) ? r.rejected_rows : 0;
      list.append(h('li', null, h('a', { href: r.url || '/console/runs/' + r.id }, r.name || '#' + r.id),
        ' ', h('span', { class: 'muted num' }, fmt.int(r.samples) + ' samples')));
    }
    const box = h('div', { class: 'callout ok', role: 'status' },
      h('strong', null, 'Imported'),
      h('div', null,
        h('div', null, fileName + ' \u2192 ' + runs.length + (runs.length === 1 ? ' run' : ' runs')
          + (rejected ? ' \u00b7 ' + fmt.int(rejected) + ' rejected rows (listed on the run page)' : '')),
        list));
    if (rejected) box.className = 'callout warn';
    return box;
  }

  // ── 7. run page charts ────────────────────────────────────────────────
  const SYNC_KEY = 'harrier-run';

  function cssVar(name, fallback) {
    const v = getComputedStyle(doc.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  const allNull = (arr) => !Array.isArray(arr) || arr.every((v) => !isNum(v));

  /** Axis size (px) that fits the widest tick label. */
  function axisSize(u, values, axisIdx, cycleNum) {
    const axis = u.axes[axisIdx];
    if (cycleNum > 1) return axis._size;
    let size = (axis.ticks && axis.ticks.size || 0) + (axis.gap || 0) + 8;
    const longest = (values || []).reduce((acc, v) => (String(v).length > acc.length ? String(v) : acc), '');
    u.ctx.save();
    u.ctx.font = axis.font[0];
    size += u.ctx.measureText(longest).width / devicePixelRatio;
    u.ctx.restore();
    return Math.ceil(size);
  }

  /** Local-time tick labels: HH:MM, or HH:MM:SS when ticks are < 1 min apart. */
  function timeTicks(u, splits, axisIdx, space, incr) {
    return splits.map((v) => (incr < 60000 ? fmt.clock(v) : fmt.clock(v).slice(0, 5)));
  }

  function emptyBox(box, title, help, isError) {
    box.querySelectorAll('.chart-empty').forEach((n) => n.remove());
    box.append(h('div', { class: 'chart-empty' + (isError ? ' is-error' : ''), role: 'note' },
      h('strong', null, title), help ? h('span', null, help) : null));
  }

  /** [title, help] of an empty chart: summary-only run, label without samples, run without samples. */
  function noDataText(ctx, summaryTitle, why) {
    if (ctx.run && ctx.run.summary_only) {
      return [summaryTitle, 'This run was imported from an aggregate report (reported by ' + toolName(ctx.run.tool) + '); it has totals only.'];
    }
    if (ctx.label) return ['No samples for \u201c' + ctx.label + '\u201d', 'Pick another label, or \u201cAll requests\u201d.'];
    return ['No samples in this run', 'Nothing to draw: ' + why + '.'];
  }

  /**
   * Build the three charts from a Series. Returns the uPlot instances.
   * Partial last bucket: its value is left out of the solid line and drawn as
   * a dashed segment over a shaded band marked "partial"; the legend then says
   * "(partial)".
   */
  function buildCharts(boxes, series, ctx) {
    const charts = [];
    const n = Array.isArray(series && series.t_ms) ? series.t_ms.length : 0;
    const partial = !!(series && series.last_bucket_partial) && n >= 2;
    const bucketS = (series && isNum(series.bucket_ms) && series.bucket_ms > 0 ? series.bucket_ms : 1000) / 1000;
    const lastIdx = n - 1;

    for (const box of Object.values(boxes)) {
      if (!box) continue;
      box.querySelectorAll('.uplot, .chart-empty').forEach((el) => el.remove());
    }
    if (n === 0) {
      const [title, help] = noDataText(ctx, 'No over-time data', 'the run has no samples with a start time');
      for (const box of Object.values(boxes)) if (box) emptyBox(box, title, help);
      return charts;
    }

    const t = series.t_ms;
    const perSec = (arr) => (arr || []).map((v) => (isNum(v) ? v / bucketS : null));
    const grid = cssVar('--c-grid', '#eee');
    const axisColor = cssVar('--c-axis', '#666');
    const font = '11.5px ' + cssVar('--font', 'sans-serif');
    const labelFont = '600 11.5px ' + cssVar('--font', 'sans-serif');

    // Some tools (hey, oha CSV) write offsets from the test start, not clock times: then
    // the x axis reads "+1 min 20 s" instead of a date in 1970.
    const relative = isNum(t[0]) && t[0] < 946684800000;
    const offsetTicks = (u, splits) => splits.map((v) => '+' + fmt.duration(v));
    const xAxis = {
      stroke: axisColor, font, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1, size: 4 },
      values: relative ? offsetTicks : timeTicks,
      // Whole seconds at least: a run of a few seconds would otherwise get ticks a
      // fraction of a second apart, each labelled with the same HH:MM:SS.
      incrs: relative ? undefined : [1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000,
        600000, 900000, 1800000, 3600000, 7200000, 10800000, 21600000, 43200000, 86400000],
      // HH:MM needs ~50 px, HH:MM:SS (ticks < 1 min apart) ~80 px
      space: (u, ai, min, max, dim) => ((max - min) / Math.max(dim, 1) * 50 <= 30000 ? 80 : 50),
    };
    const yAxis = (label, valueFmt, extra) => Object.assign({
      stroke: axisColor, font, labelFont, label, labelSize: 18, labelGap: 2, gap: 4,
      grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: axisSize,
      values: (u, splits) => splits.map(valueFmt),
    }, extra || {});
    const xSeries = {
      label: 'Time',
      value: (u, v, si, idx) => (isNum(v) ? (relative ? '+' + fmt.duration(v) : fmt.ts(v)) + (partial && idx === lastIdx ? ' (partial)' : '') : ''),
    };

    /** A line series whose legend shows the formatted value (and "(partial)"). */
    function line(label, colorVar, fmtFn, raw, extra) {
      const stroke = cssVar(colorVar, '#888');
      return Object.assign({
        label, stroke, width: 1.5, spanGaps: false, points: { show: false },
        value: (u, v, si, idx) => {
          if (idx === null || idx === undefined) return ''; // not hovering: keep the legend quiet
          if (partial && idx === lastIdx) return isNum(raw[idx]) ? fmtFn(raw[idx]) : NULL_TEXT; // the Time entry says "(partial)"
          return isNum(v) ? fmtFn(v) : NULL_TEXT;
        },
        _raw: raw,
      }, extra || {});
    }
    /** Drop the partial bucket from the solid line; drawPartial() draws it dashed. */
    const solid = (raw) => (partial ? raw.slice(0, lastIdx).concat([null]) : raw.slice());

    function drawPartial(u) {
      if (!partial) return;
      const c = u.ctx;
      const { left, top, width, height } = u.bbox;
      const x0 = u.valToPos(t[lastIdx - 1], 'x', true);
      const x1 = u.valToPos(t[lastIdx], 'x', true);
      c.save();
      c.beginPath();
      c.rect(left, top, width, height);
      c.clip();
      c.fillStyle = cssVar('--c-partial', 'rgba(128,128,128,.12)');
      c.fillRect(x0, top, Math.max(x1 - x0, 2 * devicePixelRatio), height);
      c.font = (10 * devicePixelRatio) + 'px ' + cssVar('--font', 'sans-serif');
      c.fillStyle = axisColor;
      c.textAlign = 'right';
      c.textBaseline = 'top';
      c.fillText('partial', x1 - 3 * devicePixelRatio, top + 3 * devicePixelRatio);
      c.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      for (let i = 1; i < u.series.length; i++) {
        const s = u.series[i];
        const raw = s._raw;
        if (!s.show || !raw || !isNum(raw[lastIdx - 1]) || !isNum(raw[lastIdx])) continue;
        c.strokeStyle = s._stroke || cssVar('--c-axis', '#888');
        c.lineWidth = (s.width || 1) * devicePixelRatio;
        c.beginPath();
        c.moveTo(x0, u.valToPos(raw[lastIdx - 1], s.scale, true));
        c.lineTo(x1, u.valToPos(raw[lastIdx], s.scale, true));
        c.stroke();
      }
      c.restore();
    }

    function make(box, series_, data, axes, scales) {
      const width = Math.max(200, box.clientWidth);
      const opts = {
        width,
        height: Math.max(80, box.clientHeight - 30),
        ms: 1,                          // x values are unix ms
        pxAlign: 0,
        padding: [10, 8, 0, 0],
        cursor: {
          sync: { key: SYNC_KEY, setSeries: false },
          points: { size: 6 },
          drag: { x: true, y: false, setScale: true },
          focus: { prox: 16 },
        },
        focus: { alpha: 0.35 },
        legend: { live: true },
        scales: Object.assign({ x: { time: true } }, scales),
        series: [xSeries].concat(series_),
        axes: [xAxis].concat(axes),
        hooks: {
          draw: [drawPartial, (u) => drawSaturation(u, ctx.capacity, 'at_ms')].concat(ctx.marks ? [ctx.marks.draw] : []),
          setScale: [(u, key) => { if (key === 'x') syncZoom(u); }],
          setCursor: ctx.marks ? [ctx.marks.cursor] : [],
        },
      };
      const u = new uPlot(opts, data, box);
      // remember each series' colour for the dashed partial segment
      u.series.forEach((s, i) => { if (i > 0) s._stroke = opts.series[i].stroke; s._raw = opts.series[i]._raw; });
      fit(u, box);
      charts.push(u);
      return u;
    }

    let syncing = false;
    function syncZoom(src) {
      if (syncing) return;
      syncing = true;
      const { min, max } = src.scales.x;
      for (const u of charts) {
        if (u !== src && (u.scales.x.min !== min || u.scales.x.max !== max)) u.setScale('x', { min, max });
      }
      syncing = false;
    }

    // latency
    if (boxes.latency) {
      const keys = [['p50', 'p50_ms'], ['p90', 'p90_ms'], ['p95', 'p95_ms'], ['p99', 'p99_ms'], ['max', 'max_ms'], ['mean', 'mean_ms']];
      const data = [t];
      const ser = [];
      for (const [name, key] of keys) {
        const raw = series[key] || [];
        data.push(solid(raw));
        ser.push(line(name, '--c-' + name, fmt.ms, raw, {
          scale: 'ms',
          width: name === 'max' ? 1 : 1.5,
          show: name !== 'max',           // per-second max is spiky and flattens the rest; one click shows it
          dash: name === 'mean' ? [5, 3] : undefined,
        }));
      }
      make(boxes.latency, ser, data,
        [yAxis('response time (ms)', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'ms' })],
        { ms: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 10] } });
    }

    // throughput + errors (+ error % on the right axis)
    if (boxes.throughput) {
      const rps = perSec(series.count);
      const eps = perSec(series.errors);
      const epct = (series.error_pct || []).map((v) => (isNum(v) ? v : null));
      // successful/s: what capacity is measured on (a flood of fast failures lifts
      // requests/s, never this line)
      const oks = rps.map((v, i) => (isNum(v) ? Math.max(0, v - (isNum(eps[i]) ? eps[i] : 0)) : null));
      const fmtEps = (v) => nf(1, 1).format(v) + ' err/s';
      make(boxes.throughput, [
        line('requests/s', '--c-rps', fmt.rps, rps, { scale: 'rps', fill: cssVar('--c-rps-fill', 'transparent') }),
        line('successful/s', '--c-ok', fmt.rps, oks, { scale: 'rps', width: 1.25 }),
        line('errors/s', '--c-errs', fmtEps, eps, { scale: 'rps' }),
        line('error %', '--c-errpct', fmt.pct, epct, { scale: 'pct', width: 1, dash: [2, 2] }),
      ], [t, solid(rps), solid(oks), solid(eps), solid(epct)], [
        yAxis('requests / s', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'rps' }),
        yAxis('error %', (v) => nf(0, v < 10 ? 1 : 0).format(v) + ' %', { scale: 'pct', side: 1, grid: { show: false } }),
      ], {
        rps: { range: (u, min, max) => [0, max > 0 ? max * 1.08 : 10] },
        pct: { range: (u, min, max) => [0, Math.min(100, Math.max(5, max * 1.15))] },
      });
    }

    // active users
    if (boxes.users) {
      const users = series.active_users;
      if (allNull(users)) {
        emptyBox(boxes.users, 'No active-user data',
          ctx.run && String(ctx.run.tool).toLowerCase() === 'jmeter'
            ? 'This results file has no thread counts (JMeter: save "allThreads" / Save Thread Counts).'
            : 'The tool did not report active users for this run.');
      } else {
        const raw = users.map((v) => (isNum(v) ? v : null));
        make(boxes.users, [
          line('active users', '--c-users', fmt.int, raw, { scale: 'users', fill: cssVar('--c-users-fill', 'transparent'), paths: uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined }),
        ], [t, solid(raw)], [yAxis('active users', (v) => nf(0, 0).format(v), { scale: 'users' })],
        { users: { range: (u, min, max) => [0, max > 0 ? Math.ceil(max * 1.1) : 10] } });
      }
    }
    return charts;
  }

  /**
   * The saturation markers of a capacity object: the knee (--c-capacity, "knee · ~20 users"),
   * the latency breach (--c-p95, "p95 ×2 · 45 users") and the error breach (--c-errs,
   * "errors > 1 % · 61 users"), each {x, text, colorVar, fallback}, x from `axis`
   * ('at_ms' on the over-time charts, 'users' on the load-vs-users chart).
   */
  function saturationMarks(cap, axis) {
    if (!cap) return [];
    const users = (n) => fmt.int(n) + (n === 1 ? ' user' : ' users');
    return [
      cap.knee && { at: cap.knee, text: 'knee \u00b7 ~' + users(cap.knee.users), colorVar: '--c-capacity', fallback: '#c026d3' },
      cap.latency_breach && { at: cap.latency_breach, text: 'p95 \u00d72 \u00b7 ' + users(cap.latency_breach.users), colorVar: '--c-p95', fallback: '#d97706' },
      cap.error_breach && { at: cap.error_breach, text: 'errors > 1 % \u00b7 ' + users(cap.error_breach.users), colorVar: '--c-errs', fallback: '#dc2626' },
    ].filter(Boolean).map((m) => ({ x: m.at[axis], text: m.text, colorVar: m.colorVar, fallback: m.fallback }));
  }

  /**
   * Draw hook: the saturation markers of `cap` (see saturationMarks), each a dashed
   * vertical line with a small label at the top, labels stacked so they never overlap
   * (the knee's line on top where lines coincide).
   * Nothing for a marker outside the visible range (zoomed away) or without a capacity.
   */
  function drawSaturation(u, cap, axis) {
    const { min, max } = u.scales.x;
    if (!isNum(min) || !isNum(max)) return;
    // drawn last to first, so the knee's line stays on top where markers coincide
    saturationMarks(cap, axis).map((m, i) => [m, i]).reverse().forEach(([m, i]) => {
      if (!isNum(m.x) || m.x < min || m.x > max) return;
      drawMarker(u, m.x, m.text, cssVar(m.colorVar, m.fallback), i);
    });
  }

  /** One dashed vertical marker at x value `x` labelled `text`, its label in row `row`. */
  function drawMarker(u, x, text, color, row) {
    const dpr = devicePixelRatio;
    const c = u.ctx;
    const { left, top, width, height } = u.bbox;
    const px = Math.round(u.valToPos(x, 'x', true)) + 0.5;
    c.save();
    c.beginPath();
    c.rect(left, top, width, height);
    c.clip();
    c.strokeStyle = color;
    c.lineWidth = 1.5 * dpr;
    c.setLineDash([6 * dpr, 3 * dpr]);
    c.beginPath();
    c.moveTo(px, top);
    c.lineTo(px, top + height);
    c.stroke();
    c.setLineDash([]);
    // the label sits right of the line, or left of it near the right edge
    c.font = '600 ' + (10.5 * dpr) + 'px ' + cssVar('--font', 'sans-serif');
    const tw = c.measureText(text).width;
    const padX = 4 * dpr;
    const boxH = 16 * dpr;
    const onRight = px + 3 * dpr + tw + 2 * padX <= left + width;
    const bx = onRight ? px + 3 * dpr : px - 3 * dpr - tw - 2 * padX;
    const by = top + 3 * dpr + row * (boxH + 2 * dpr);
    c.fillStyle = cssVar('--surface', '#fff');
    c.globalAlpha = 0.88;
    c.fillRect(bx, by, tw + 2 * padX, boxH);
    c.globalAlpha = 1;
    c.fillStyle = color;
    c.textAlign = 'left';
    c.textBaseline = 'middle';
    c.fillText(text, bx + padX, by + boxH / 2);
    c.restore();
  }

  // ── 7b. distribution, percentile curve, load vs. users ───────────────
  const NINES_MAX = 4.5;   // x' of p100 ("max"): p99.99 sits at 4, so max gets its own place
  /** The "nines" axis: x' = −log10(1 − p/100), 90 → 1, 99 → 2, 99.9 → 3, 99.99 → 4; p100 → 4.5. */
  const nines = (p) => (p >= 100 ? NINES_MAX : Math.min(4, -Math.log10(1 - p / 100)));
  /** "min", "p50", "p99.9", "max". */
  const pName = (p) => (p <= 0 ? 'min' : p >= 100 ? 'max' : 'p' + nf(0, 2).format(p));
  /** Integer-ms bin range: "16 – 30 ms", "1.20 – 1.35 s", "950 ms – 1.02 s", "12 ms". */
  function msRange(lo, hi) {
    if (hi <= lo) return fmt.ms(lo);
    if (Math.round(hi) < 1000) return nf(0, 0).format(lo) + ' \u2013 ' + fmt.ms(hi);
    if (lo >= 1000) return nf(2, 2).format(lo / 1000) + ' \u2013 ' + fmt.ms(hi);
    return fmt.ms(lo) + ' \u2013 ' + fmt.ms(hi);
  }

  /** Shared look of the charts that are not over time. */
  function plainAxes() {
    const grid = cssVar('--c-grid', '#eee');
    const axisColor = cssVar('--c-axis', '#666');
    const font = '11.5px ' + cssVar('--font', 'sans-serif');
    const labelFont = '600 11.5px ' + cssVar('--font', 'sans-serif');
    return (label, valueFmt, extra) => Object.assign({
      stroke: axisColor, font, labelFont, label, labelSize: 18, labelGap: 2, gap: 4,
      grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: axisSize,
      values: (u, splits) => splits.map(valueFmt),
    }, extra || {});
  }
  const X_AXIS_SIZE = 26;   // tick labels + gap under the plot; the axis label comes on top
  const INT_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2500, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];

  /**
   * setCursor hook: a small tooltip in the plot area with textFn(u, idx) →
   * array of lines (strings or nodes; the first is bold), or null to hide it.
   */
  function tipHook(textFn) {
    return (u) => {
      let tip = u._tip;
      if (!tip) {
        tip = u._tip = h('div', { class: 'chart-tip', hidden: true });
        u.over.append(tip);
      }
      const idx = u.cursor.idx;
      const lines = idx === null || idx === undefined || !(u.cursor.left >= 0) ? null : textFn(u, idx);
      if (!lines) { tip.hidden = true; return; }
      tip.replaceChildren(...lines.map((l, i) => h('div', i === 0 ? { class: 'chart-tip-title' } : null, l)));
      tip.hidden = false;
      const ow = u.over.clientWidth;
      const oh = u.over.clientHeight;
      const x = u.valToPos(u.data[0][idx], 'x');
      const tw = tip.offsetWidth;
      const th = tip.offsetHeight;
      let left = x + 12;
      if (left + tw > ow) left = x - 12 - tw;
      let top = u.cursor.top - th - 12;
      if (top < 0) top = u.cursor.top + 16;
      left = Math.max(0, Math.min(left, ow - tw));
      top = Math.max(0, Math.min(top, oh - th));
      tip.style.transform = 'translate(' + Math.round(left) + 'px,' + Math.round(top) + 'px)';
    };
  }

  /** uPlot options common to the distribution charts (no zoom, no legend: a tooltip instead). */
  function plainOpts(box, extra) {
    return Object.assign({
      width: Math.max(200, box.clientWidth),
      height: Math.max(80, box.clientHeight),
      pxAlign: 0,
      padding: [12, 10, 0, 0],
      legend: { show: false },
      cursor: { y: false, drag: { x: false, y: false, setScale: false }, points: { size: 6 } },
    }, extra);
  }

  /**
   * The distribution charts of a Distribution {label, count, curve: {p, ms},
   * bins: {lower_ms, count}} in boxes.distribution and boxes.percentiles.
   * ctx: {run, label, error (text: loading failed), loading}. Returns the uPlot instances.
   */
  function buildDistCharts(boxes, dist, ctx) {
    const charts = [];
    const live = Object.values(boxes).filter(Boolean);
    for (const box of live) box.querySelectorAll('.uplot, .chart-empty').forEach((el) => el.remove());
    if (!live.length) return charts;
    if (ctx.run && ctx.run.summary_only) {
      const [title, help] = noDataText(ctx, 'No distribution', '');
      for (const box of live) emptyBox(box, title, help);
      return charts;
    }
    if (ctx.error) {
      for (const box of live) emptyBox(box, 'Could not load the distribution', ctx.error, true);
      return charts;
    }
    if (!dist) {
      for (const box of live) emptyBox(box, ctx.loading ? 'Loading\u2026' : 'No distribution data', null);
      return charts;
    }
    const total = isNum(dist.count) ? dist.count : 0;
    const curve = dist.curve || {};
    const P = Array.isArray(curve.p) ? curve.p : [];
    const M = Array.isArray(curve.ms) ? curve.ms : [];
    if (!total || !P.length) {
      // A run with requests but no response times: streamed as per-interval aggregates
      // (JMeter's Backend Listener, k6 over OTLP).
      const aggregates = ctx.run && isNum(ctx.run.count) && ctx.run.count > 0;
      const [title, help] = aggregates
        ? ['No response-time distribution', 'This run arrived as per-interval aggregates (counts, mean, min, max), without single response times: import the tool\u2019s result file for its distribution and percentiles.']
        : noDataText(ctx, 'No distribution', 'the run has no samples');
      for (const box of live) emptyBox(box, title, help);
      return charts;
    }
    const axis = plainAxes();
    const maxMs = M[M.length - 1];
    const msTick = (v) => nf(0, v < 10 ? 1 : 0).format(v);

    // histogram: one bar per bin; the last bin is open-ended when max lies past its width
    const bins = dist.bins || {};
    const lower = Array.isArray(bins.lower_ms) ? bins.lower_ms : [];
    const counts = Array.isArray(bins.count) ? bins.count : [];
    const nb = Math.min(lower.length, counts.length);
    if (boxes.distribution && nb) {
      const w = nb > 1 ? Math.max(1, lower[1] - lower[0]) : Math.max(1, maxMs - lower[0] + 1);
      const openTail = isNum(maxMs) && maxMs > lower[nb - 1] + w - 1;
      const upper = (i) => (i < nb - 1 ? lower[i + 1] - 1 : Math.max(lower[i] + w - 1, isNum(maxMs) ? maxMs : 0));
      const xs = lower.slice(0, nb).map((l) => l + w / 2);
      const main = counts.slice(0, nb).map((c, i) => (openTail && i === nb - 1 ? null : c));
      const tail = counts.slice(0, nb).map((c, i) => (openTail && i === nb - 1 ? c : null));
      const cum = [];
      counts.slice(0, nb).reduce((acc, c, i) => (cum[i] = acc + c), 0);
      const peak = Math.max(1, ...counts.slice(0, nb));
      const barPaths = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [1, Infinity], gap: 1, align: 0 }) : undefined;
      const distColor = cssVar('--c-dist', '#3b6fd8');
      const tailColor = cssVar('--c-dist-tail', '#ea7a16');
      const drawTail = (u) => {
        if (!openTail) return;
        const c = u.ctx;
        const dpr = devicePixelRatio;
        const x = u.valToPos(xs[nb - 1], 'x', true);
        const y = u.valToPos(tail[nb - 1], 'y', true);
        c.save();
        c.font = (10 * dpr) + 'px ' + cssVar('--font', 'sans-serif');
        c.fillStyle = tailColor;
        c.textAlign = 'right';
        c.textBaseline = 'bottom';
        c.fillText('max ' + fmt.ms(maxMs), Math.min(x + 6 * dpr, u.bbox.left + u.bbox.width - 2 * dpr), y - 3 * dpr);
        c.restore();
      };
      const u = new uPlot(plainOpts(boxes.distribution, {
        scales: {
          x: { time: false, range: () => [lower[0], lower[nb - 1] + w] },
          y: { range: () => [0, peak * 1.1] },
        },
        series: [
          { label: 'response time' },
          { label: 'samples', stroke: distColor, fill: cssVar('--c-dist-fill', distColor), width: 0, paths: barPaths, points: { show: false } },
          { label: 'slower', stroke: tailColor, fill: cssVar('--c-dist-tail-fill', tailColor), width: 0, paths: barPaths, points: { show: false } },
        ],
        axes: [
          axis('response time (ms)', msTick, { space: 60, size: X_AXIS_SIZE }),
          axis('samples', (v) => nf(0, 0).format(v), { incrs: INT_INCRS }),
        ],
        hooks: {
          draw: [drawTail],
          setCursor: [tipHook((uu, i) => {
            const c = counts[i];
            const last = i === nb - 1 && openTail;
            return [
              last ? '\u2265 ' + fmt.ms(lower[i]) + ' (up to ' + fmt.ms(maxMs) + ')' : msRange(lower[i], upper(i)),
              fmt.int(c) + (c === 1 ? ' sample' : ' samples') + ' \u00b7 ' + fmt.pct(100 * c / total),
              last ? 'everything slower than the bins above' : '\u2264 ' + fmt.ms(upper(i)) + ': ' + fmt.pct(100 * cum[i] / total) + ' of samples',
            ];
          })],
        },
      }), [xs, main, tail], boxes.distribution);
      charts.push(u);
    } else if (boxes.distribution) {
      emptyBox(boxes.distribution, 'No distribution', 'The server sent no bins.');
    }

    // percentile curve on the nines axis
    if (boxes.percentiles) {
      const pts = P.map((p, i) => [nines(p), M[i], p]).filter((r) => isNum(r[0]) && isNum(r[1]));
      // strictly ascending x (p99.99 and a capped value may meet): keep the later point
      const xs = [];
      const ys = [];
      const ps = [];
      for (const [x, y, p] of pts) {
        if (xs.length && x <= xs[xs.length - 1]) { xs.pop(); ys.pop(); ps.pop(); }
        xs.push(x); ys.push(y); ps.push(p);
      }
      const ticks = [[0, 'min'], [Math.log10(2), 'p50'], [Math.log10(4), 'p75'], [1, 'p90'], [2, 'p99'], [3, 'p99.9'], [4, 'p99.99'], [NINES_MAX, 'max']];
      const top = Math.max(...ys);
      const u = new uPlot(plainOpts(boxes.percentiles, {
        padding: [12, 16, 0, 0],   // room for the "max" tick
        scales: {
          x: { time: false, range: () => [0, NINES_MAX] },
          y: { range: () => [0, top > 0 ? top * 1.06 : 10] },
        },
        series: [
          { label: 'percentile' },
          { label: 'response time', stroke: cssVar('--c-curve', '#0f9488'), fill: cssVar('--c-curve-fill', 'transparent'), width: 1.75, points: { show: true, size: 3.5 } },
        ],
        axes: [
          axis('percentile', null, {
            size: X_AXIS_SIZE,
            // p75 only where there is room between min and p90
            splits: (u) => ticks.filter((t) => t[1] !== 'p75' || u.bbox.width / devicePixelRatio > 520).map((t) => t[0]),
            values: (u, splits) => splits.map((v) => (ticks.find((t) => Math.abs(t[0] - v) < 1e-9) || [0, ''])[1]),
          }),
          axis('response time (ms)', msTick),
        ],
        hooks: {
          setCursor: [tipHook((uu, i) => [pName(ps[i]) + ': ' + fmt.ms(ys[i])])],
        },
      }), [xs, ys], boxes.percentiles);
      charts.push(u);
    }
    for (const u of charts) fit(u, u.root.parentElement);
    return charts;
  }

  /**
   * Load vs. users from an over-time Series: seconds grouped by active users
   * (the partial last bucket left out). Per level: req/s = mean count per
   * second, p95 = median of the per-second p95, error % = Σerrors / Σcount × 100
   * (no samples → null). A label's series has no user count in seconds without
   * that label's samples, so each second's level comes from `runSeries` (the
   * run's all-requests series) when given, else from the series itself.
   */
  function usersLevels(series, runSeries) {
    const t = (series && series.t_ms) || [];
    const n = t.length;
    const partial = !!series.last_bucket_partial && n >= 2;
    const bucketS = (isNum(series.bucket_ms) && series.bucket_ms > 0 ? series.bucket_ms : 1000) / 1000;
    const au = series.active_users || [];
    const runUsers = new Map();
    if (runSeries && runSeries !== series && Array.isArray(runSeries.t_ms) && Array.isArray(runSeries.active_users)
        && runSeries.bucket_ms === series.bucket_ms) {
      runSeries.t_ms.forEach((tm, i) => { if (isNum(runSeries.active_users[i])) runUsers.set(tm, runSeries.active_users[i]); });
    }
    const levels = new Map();
    for (let i = 0; i < n; i++) {
      if (partial && i === n - 1) continue;
      const users = runUsers.size && runUsers.has(t[i]) ? runUsers.get(t[i]) : au[i];
      const c = series.count ? series.count[i] : null;
      if (!isNum(users) || !isNum(c)) continue;
      let L = levels.get(users);
      if (!L) levels.set(users, (L = { users, seconds: 0, rpsSum: 0, okSum: 0, count: 0, errors: 0, p95: [] }));
      L.seconds++;
      L.rpsSum += c / bucketS;
      L.count += c;
      const e = series.errors ? series.errors[i] : null;
      if (isNum(e)) L.errors += e;
      L.okSum += Math.max(0, c - (isNum(e) ? e : 0)) / bucketS;
      const p = series.p95_ms ? series.p95_ms[i] : null;
      if (isNum(p)) L.p95.push(p);
    }
    const median = (a) => {
      if (!a.length) return null;
      const s = a.slice().sort((x, y) => x - y);
      const m = s.length >> 1;
      return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
    };
    // A stepped ramp (20 levels or fewer) loses its transitions: a level held for less
    // than a quarter of the typical level's time (the seconds-weighted median) between two
    // held levels is the tool adding users between steps, as the saturation analysis
    // treats it.
    let all = Array.from(levels.values());
    if (all.length <= 20) {
      const lengths = all.map((L) => L.seconds).sort((a, b) => a - b);
      const total = lengths.reduce((a, b) => a + b, 0);
      let seen = 0;
      let typical = 0;
      for (const len of lengths) { seen += len; if (2 * seen >= total) { typical = len; break; } }
      const held = (L) => L.seconds >= 0.25 * typical;
      const heldUsers = all.filter(held).map((L) => L.users);
      const lo = Math.min(...heldUsers);
      const hi = Math.max(...heldUsers);
      all = all.filter((L) => held(L) || L.users < lo || L.users > hi);
    }
    const out = { users: [], seconds: [], rps: [], ok: [], p95: [], errPct: [] };
    for (const L of all.sort((a, b) => a.users - b.users)) {
      out.users.push(L.users);
      out.seconds.push(L.seconds);
      out.rps.push(L.rpsSum / L.seconds);
      out.ok.push(L.okSum / L.seconds);
      out.p95.push(median(L.p95));
      out.errPct.push(L.count > 0 ? 100 * L.errors / L.count : null);
    }
    return out;
  }

  /** The load-vs-users chart in box; ctx {run, label, capacity, runSeries}. Returns the uPlot or null. */
  function buildVsUsers(box, series, ctx) {
    box.querySelectorAll('.uplot, .chart-empty').forEach((el) => el.remove());
    const n = Array.isArray(series && series.t_ms) ? series.t_ms.length : 0;
    if (n === 0) {
      const [title, help] = noDataText(ctx, 'No load data', 'the run has no samples with a start time');
      emptyBox(box, title, help);
      return null;
    }
    if (allNull(series.active_users) && (!ctx.runSeries || allNull(ctx.runSeries.active_users))) {
      emptyBox(box, 'No active-user data',
        ctx.run && String(ctx.run.tool).toLowerCase() === 'jmeter'
          ? 'This results file has no thread counts (JMeter: save "allThreads" / Save Thread Counts), so load cannot be set against users.'
          : 'The tool did not report active users for this run, so load cannot be set against users.');
      return null;
    }
    const L = usersLevels(series, ctx.runSeries);
    if (!L.users.length) {
      emptyBox(box, 'No complete seconds', 'Every second with a user count is the partial last bucket.');
      return null;
    }
    const axis = plainAxes();
    const cap = ctx.capacity || null;
    let lo = L.users[0];
    let hi = L.users[L.users.length - 1];
    saturationMarks(cap, 'users').forEach((m) => { if (isNum(m.x)) { lo = Math.min(lo, m.x); hi = Math.max(hi, m.x); } });
    if (hi === lo) { lo -= 1; hi += 1; }
    const pad = Math.max(0.5, (hi - lo) * 0.02);
    const few = L.users.length <= 80;
    const line = (label, colorVar, scale, fmtFn, extra) => Object.assign({
      label, scale, stroke: cssVar(colorVar, '#888'), width: 1.75,
      points: { show: few, size: 4 },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '' : fmtFn(v)),
    }, extra || {});
    const u = new uPlot({
      width: Math.max(200, box.clientWidth),
      height: Math.max(80, box.clientHeight - 30),
      pxAlign: 0,
      padding: [12, 8, 0, 0],
      legend: { live: true },
      cursor: { drag: { x: false, y: false, setScale: false }, points: { size: 6 }, focus: { prox: 16 } },
      focus: { alpha: 0.35 },
      scales: {
        x: { time: false, range: () => [lo - pad, hi + pad] },
        rps: { range: (uu, min, max) => [0, max > 0 ? max * 1.1 : 10] },
        ms: { range: (uu, min, max) => [0, max > 0 ? max * 1.1 : 10] },
        pct: { range: (uu, min, max) => [0, Math.min(100, Math.max(5, max * 1.15))] },
      },
      series: [
        {
          label: 'Active users',
          value: (uu, v, si, idx) => (isNum(v) && idx !== null && idx !== undefined
            ? fmt.int(v) + (v === 1 ? ' user' : ' users') + ' \u00b7 ' + fmt.int(L.seconds[idx]) + ' s' : ''),
        },
        line('requests/s', '--c-rps', 'rps', fmt.rps),
        line('successful/s', '--c-ok', 'rps', fmt.rps),
        line('p95', '--c-p95', 'ms', fmt.ms),
        line('error %', '--c-errs', 'pct', fmt.pct, { width: 1.25, dash: [4, 3] }),
      ],
      axes: [
        axis('active users', (v) => nf(0, 0).format(v), { incrs: INT_INCRS, space: 40, size: X_AXIS_SIZE }),
        axis('requests / s', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'rps' }),
        axis('p95 (ms)', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'ms', side: 1, grid: { show: false } }),
        axis('error %', (v) => nf(0, v < 10 ? 1 : 0).format(v) + ' %', { scale: 'pct', side: 1, grid: { show: false } }),
      ],
      hooks: { draw: [(uu) => drawSaturation(uu, cap, 'users')] },
    }, [L.users, L.rps, L.ok, L.p95, L.errPct], box);
    fit(u, box);
    return u;
  }

  /**
   * The saturation search of `harrier load find` in box: per step (x = step number),
   * offered and achieved requests/s on the left axis, latency p99 on the right; failing
   * steps' points drawn in the error colour. search = the run's `capacity` (kind "search").
   */
  /**
   * The load generator's own series of a `harrier load` run (#run-data.generator,
   * reported.seconds: columns second, offered, achieved, errors, latency_p50_ms,
   * latency_p99_ms, service_p50_ms, service_p99_ms, dispatch_p99_ms, in_flight,
   * connections; one point per step_s seconds): offered vs achieved req/s, corrected vs
   * uncorrected latency, in flight and dispatch delay. x = seconds since the run's start.
   */
  function buildGenerator(boxes, gen) {
    const charts = [];
    for (const box of Object.values(boxes)) {
      if (box) box.querySelectorAll('.uplot, .chart-empty').forEach((el) => el.remove());
    }
    const x = gen && Array.isArray(gen.second) ? gen.second : [];
    if (!x.length) {
      for (const box of Object.values(boxes)) if (box) emptyBox(box, 'No seconds yet', 'The generator has not handed over its first second.');
      return charts;
    }
    const axis = plainAxes();
    const col = (k) => (Array.isArray(gen[k]) ? gen[k].map((v) => (isNum(v) ? v : null)) : x.map(() => null));
    // whole seconds since the start: "45 s", "2 min 05 s", "1 h 02 min"
    const since = (v) => {
      const t = Math.round(v);
      if (t < 60) return t + ' s';
      if (t < 3600) return Math.floor(t / 60) + ' min ' + String(t % 60).padStart(2, '0') + ' s';
      return Math.floor(t / 3600) + ' h ' + String(Math.floor((t % 3600) / 60)).padStart(2, '0') + ' min';
    };
    const xAxis = axis('since the start', since, { size: X_AXIS_SIZE, space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400] });
    const line = (label, colorVar, scale, fmtFn, extra) => Object.assign({
      label, scale, stroke: cssVar(colorVar, '#888'), width: 1.5, points: { show: false },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '' : isNum(v) ? fmtFn(v) : NULL_TEXT),
    }, extra || {});
    const make = (box, series, data, axes, scales) => {
      if (!box) return;
      const u = new uPlot({
        width: Math.max(200, box.clientWidth),
        height: Math.max(80, box.clientHeight - 30),
        pxAlign: 0,
        padding: [10, 8, 0, 0],
        legend: { live: true },
        cursor: { sync: { key: 'harrier-generator', setSeries: false }, points: { size: 6 }, drag: { x: true, y: false, setScale: true }, focus: { prox: 16 } },
        focus: { alpha: 0.35 },
        scales: Object.assign({ x: { time: false } }, scales),
        series: [{ label: 'Second', value: (uu, v) => (isNum(v) ? since(v) : '') }].concat(series),
        axes: [xAxis].concat(axes),
      }, data, box);
      fit(u, box);
      charts.push(u);
    };
    const zeroUp = (pad) => ({ range: (u, min, max) => [0, max > 0 ? max * pad : 10] });
    const nfAxis = (v) => nf(0, v < 10 ? 1 : 0).format(v);
    const fmtEps = (v) => nf(1, 1).format(v) + ' err/s';
    make(boxes.rate, [
      line('offered', '--c-max', 'rps', fmt.rps, { dash: [4, 3] }),
      line('achieved', '--c-rps', 'rps', fmt.rps, { fill: cssVar('--c-rps-fill', 'transparent') }),
      line('errors/s', '--c-errs', 'rps', fmtEps),
    ], [x, col('offered'), col('achieved'), col('errors')],
    [axis('requests / s', nfAxis, { scale: 'rps' })], { rps: zeroUp(1.08) });
    make(boxes.latency, [
      line('p50 corrected', '--c-p50', 'ms', fmt.ms),
      line('p99 corrected', '--c-p99', 'ms', fmt.ms),
      line('p50 service', '--c-p50', 'ms', fmt.ms, { dash: [4, 3], width: 1.25 }),
      line('p99 service', '--c-p99', 'ms', fmt.ms, { dash: [4, 3], width: 1.25 }),
    ], [x, col('latency_p50_ms'), col('latency_p99_ms'), col('service_p50_ms'), col('service_p99_ms')],
    [axis('latency (ms)', nfAxis, { scale: 'ms' })], { ms: zeroUp(1.05) });
    make(boxes.load, [
      line('in flight', '--c-users', 'n', fmt.int, { fill: cssVar('--c-users-fill', 'transparent') }),
      line('dispatch p99', '--c-errpct', 'ms', fmt.ms, { width: 1.25, dash: [2, 2] }),
    ], [x, col('in_flight'), col('dispatch_p99_ms')], [
      axis('requests in flight', (v) => nf(0, 0).format(v), { scale: 'n' }),
      axis('dispatch p99 (ms)', nfAxis, { scale: 'ms', side: 1, grid: { show: false } }),
    ], { n: zeroUp(1.1), ms: zeroUp(1.1) });
    return charts;
  }

  function buildSearch(box, search) {
    box.querySelectorAll('.uplot, .chart-empty').forEach((el) => el.remove());
    const steps = (search && Array.isArray(search.steps)) ? search.steps : [];
    if (!steps.length) {
      emptyBox(box, 'No steps', 'The search stopped before its first step was judged.');
      return null;
    }
    const axis = plainAxes();
    const x = steps.map((st, i) => i + 1);
    const offered = steps.map((st) => (isNum(st.offered_rps) ? st.offered_rps : null));
    const achieved = steps.map((st) => (isNum(st.achieved_rps) ? st.achieved_rps : null));
    const p99 = steps.map((st) => (isNum(st.p99_ms) ? st.p99_ms : null));
    const errColor = cssVar('--c-errs', '#dc2626');
    const line = (label, colorVar, scale, fmtFn, extra) => Object.assign({
      label, scale, stroke: cssVar(colorVar, '#888'), width: 1.75,
      points: { show: true, size: 5 },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '' : fmtFn(v)),
    }, extra || {});
    const u = new uPlot({
      width: Math.max(200, box.clientWidth),
      height: Math.max(80, box.clientHeight - 30),
      pxAlign: 0,
      padding: [12, 8, 0, 0],
      legend: { live: true },
      cursor: { drag: { x: false, y: false, setScale: false }, points: { size: 6 }, focus: { prox: 16 } },
      focus: { alpha: 0.35 },
      scales: {
        x: { time: false, range: () => [0.5, steps.length + 0.5] },
        rps: { range: (uu, min, max) => [0, max > 0 ? max * 1.1 : 10] },
        ms: { range: (uu, min, max) => [0, max > 0 ? max * 1.1 : 10] },
      },
      series: [
        {
          label: 'Step',
          value: (uu, v, si, idx) => (isNum(v) && idx !== null && idx !== undefined
            ? v + ' \u00b7 ' + steps[idx].phase + ' \u00b7 ' + steps[idx].verdict : ''),
        },
        line('offered', '--c-max', 'rps', fmt.rps, { dash: [4, 3] }),
        line('achieved', '--c-rps', 'rps', fmt.rps, {
          points: {
            show: true, size: 7,
            fill: (uu, si) => cssVar('--c-rps', '#2563eb'),
          },
        }),
        line('p99', '--c-p99', 'ms', fmt.ms, { width: 1.25 }),
      ],
      axes: [
        axis('step', (v) => nf(0, 0).format(v), { incrs: INT_INCRS, space: 30, size: X_AXIS_SIZE }),
        axis('requests / s', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'rps' }),
        axis('p99 (ms)', (v) => nf(0, v < 10 ? 1 : 0).format(v), { scale: 'ms', side: 1, grid: { show: false } }),
      ],
      hooks: {
        draw: [(uu) => {
          // a ring around each failing step's achieved point
          const c = uu.ctx;
          c.save();
          c.strokeStyle = errColor;
          c.lineWidth = 2 * (window.devicePixelRatio || 1);
          steps.forEach((st, i) => {
            if (st.verdict === 'pass' || !isNum(achieved[i])) return;
            const cx = uu.valToPos(x[i], 'x', true);
            const cy = uu.valToPos(achieved[i], 'rps', true);
            c.beginPath();
            c.arc(cx, cy, 6 * (window.devicePixelRatio || 1), 0, 2 * Math.PI);
            c.stroke();
          });
          c.restore();
        }],
      },
    }, [x, offered, achieved, p99], box);
    fit(u, box);
    return u;
  }

  /** Size a chart to its box: full width, box height minus the legend. */
  function fit(u, box) {
    const legend = u.root.querySelector('.u-legend');
    // measure the legend as it is while hovering (values shown), so hovering never needs more room
    const idle = u.legend.idx === null || u.legend.idx === undefined;
    const n = u.data[0] ? u.data[0].length : 0;
    if (legend && idle && n) u.setLegend({ idx: n - 1 }, false);
    const lh = legend ? legend.offsetHeight : 0;
    if (legend && idle && n) u.setLegend({ idx: null }, false);
    const width = Math.floor(box.clientWidth);
    const height = Math.max(60, Math.floor(box.clientHeight - lh - 2));
    if (width > 0 && (width !== u.width || height !== u.height)) u.setSize({ width, height });
  }

  function initRunPage() {
    const island = $('#run-data');
    const boxes = {
      latency: $('.chart[data-chart="latency"]'),
      throughput: $('.chart[data-chart="throughput"]'),
      users: $('.chart[data-chart="users"]'),
    };
    const distBoxes = {
      distribution: $('.chart[data-chart="distribution"]'),
      percentiles: $('.chart[data-chart="percentiles"]'),
    };
    const usersBox = $('.chart[data-chart="vs-users"]');
    const searchBox = $('.chart[data-chart="search"]');
    const genBoxes = {
      rate: $('.chart[data-chart="gen-rate"]'),
      latency: $('.chart[data-chart="gen-latency"]'),
      load: $('.chart[data-chart="gen-load"]'),
    };
    const seriesBoxes = Object.values(boxes).concat([usersBox]).filter(Boolean);
    const allBoxes = seriesBoxes.concat(Object.values(distBoxes).filter(Boolean), searchBox ? [searchBox] : [],
      Object.values(genBoxes).filter(Boolean));
    if (!allBoxes.length) return;
    let data = null;
    try { data = island ? JSON.parse(island.textContent) : null; } catch (err) {
      console.error('harrier: bad #run-data', err);
    }
    if (!data) {
      for (const box of allBoxes) emptyBox(box, 'Chart data missing', 'The page did not include the run data.', true);
      return;
    }
    if (typeof uPlot === 'undefined') {
      for (const box of allBoxes) emptyBox(box, 'Chart library not loaded', 'static/vendor/uplot-*/uPlot.iife.min.js is missing.', true);
      return;
    }
    const select = $('#ts-label');
    const note = $('#ts-note');
    const hasDist = !!(distBoxes.distribution || distBoxes.percentiles);
    const state = {
      series: data.timeseries, label: '', charts: [], usersChart: null,
      dist: null, distError: null, distLoading: hasDist, distCharts: [], searchChart: null, genCharts: [],
    };
    // data.timeseries is the run's all-requests series: load vs. users takes each second's user level from it
    // alert periods of live-run rules for this run (static/alertmarks.js, when loaded)
    const marks = window.harrierAlertMarks && data.run && isNum(data.run.id) ? window.harrierAlertMarks.forRun(data.run.id) : null;
    const ctx = () => ({ run: data.run, label: state.label, capacity: data.capacity || null, runSeries: data.timeseries || null, marks });

    /** Over-time charts and load vs. users (both from state.series). */
    function drawSeries() {
      for (const u of state.charts) u.destroy();
      state.charts = buildCharts(boxes, state.series || {}, ctx());
      if (state.usersChart) state.usersChart.destroy();
      state.usersChart = usersBox ? buildVsUsers(usersBox, state.series || {}, ctx()) : null;
      if (note && state.series && state.series.hdr_note) note.textContent = state.series.hdr_note;
    }
    /** Distribution and percentile curve (from state.dist). */
    function drawDist() {
      for (const u of state.distCharts) u.destroy();
      state.distCharts = hasDist
        ? buildDistCharts(distBoxes, state.dist, Object.assign(ctx(), { error: state.distError, loading: state.distLoading }))
        : [];
    }
    /** The saturation search's steps (a run of `harrier load find`). */
    function drawSearch() {
      if (state.searchChart) state.searchChart.destroy();
      state.searchChart = searchBox ? buildSearch(searchBox, data.search) : null;
    }
    /** The load generator's series (a run of `harrier load`). */
    function drawGenerator() {
      for (const u of state.genCharts) u.destroy();
      state.genCharts = genBoxes.rate ? buildGenerator(genBoxes, data.generator) : [];
    }
    function draw() { drawSeries(); drawDist(); drawSearch(); drawGenerator(); }
    const allCharts = () => state.charts.concat(state.distCharts, state.usersChart ? [state.usersChart] : [],
      state.searchChart ? [state.searchChart] : [], state.genCharts);
    const withLabel = (base, label) => base + (label ? (base.includes('?') ? '&' : '?') + 'label=' + encodeURIComponent(label) : '');

    async function getJson(url) {
      const res = await fetch(url, { headers: { Accept: 'application/json' } });
      let body = null;
      try { body = await res.json(); } catch (_) { /* not JSON */ }
      if (!res.ok) throw new Error((body && body.error) || 'HTTP ' + res.status);
      return body;
    }

    let seq = 0;
    async function loadSeries(label) {
      const mySeq = ++seq;
      const base = data.timeseries_url;
      if (!base) return;
      for (const box of seriesBoxes) box.setAttribute('aria-busy', 'true');
      try {
        const body = await getJson(withLabel(base, label));
        if (mySeq !== seq) return;
        state.series = body;
        drawSeries();
      } catch (err) {
        if (mySeq !== seq) return;
        for (const u of state.charts) u.destroy();
        state.charts = [];
        if (state.usersChart) state.usersChart.destroy();
        state.usersChart = null;
        for (const box of seriesBoxes) {
          box.querySelectorAll('.uplot').forEach((el) => el.remove());
          emptyBox(box, 'Could not load the time series', String(err.message || err), true);
        }
      } finally {
        if (mySeq === seq) for (const box of seriesBoxes) box.removeAttribute('aria-busy');
      }
    }

    let distSeq = 0;
    async function loadDist(label) {
      if (!hasDist) return;
      const mySeq = ++distSeq;
      const dBoxes = Object.values(distBoxes).filter(Boolean);
      if ((data.run && data.run.summary_only) || !data.distribution_url) {
        state.dist = null;
        state.distLoading = false;
        state.distError = data.run && data.run.summary_only ? null : 'The page did not include distribution_url.';
        drawDist();
        return;
      }
      for (const box of dBoxes) box.setAttribute('aria-busy', 'true');
      try {
        const body = await getJson(withLabel(data.distribution_url, label));
        if (mySeq !== distSeq) return;
        state.dist = body;
        state.distError = null;
      } catch (err) {
        if (mySeq !== distSeq) return;
        state.dist = null;
        state.distError = String(err.message || err);
      } finally {
        if (mySeq === distSeq) {
          state.distLoading = false;
          for (const box of dBoxes) box.removeAttribute('aria-busy');
        }
      }
      if (mySeq === distSeq) drawDist();
    }

    /** Switch every chart to `label` ("" = all requests). */
    function load(label) {
      state.label = label;
      return Promise.all([loadSeries(label), loadDist(label)]);
    }

    draw();

    // a reload keeps the chosen label
    const wanted = new URL(location.href).searchParams.get('label');
    if (select && wanted && Array.from(select.options).some((o) => o.value === wanted)) {
      select.value = wanted;
      load(wanted);
    } else {
      loadDist('');
    }
    if (select) {
      select.addEventListener('change', () => {
        const label = select.value;
        const u = new URL(location.href);
        if (label) u.searchParams.set('label', label); else u.searchParams.delete('label');
        history.replaceState(null, '', u);
        load(label);
      });
    }

    // resize with the container (width changes; heights are fixed in CSS)
    if ('ResizeObserver' in window) {
      let raf = 0;
      const ro = new ResizeObserver(() => {
        cancelAnimationFrame(raf);
        raf = requestAnimationFrame(() => {
          for (const u of allCharts()) fit(u, u.root.parentElement);
        });
      });
      for (const box of allBoxes) ro.observe(box);
    }
    // colours come from CSS: redraw when the colour scheme flips
    const mq = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)');
    if (mq && mq.addEventListener) mq.addEventListener('change', draw);

    // A live run: each announcement of it (about once a second) refetches the page and
    // swaps in its totals and chart data; the charts redraw in place (fixed heights, no
    // layout jump). When it completes, one reload shows the exact, final page.
    let live = doc.body.dataset.runStatus === 'live';
    let refreshing = false;
    let again = false;
    async function refreshLive() {
      if (refreshing) { again = true; return; }
      refreshing = true;
      try {
        const res = await fetch(location.href, { headers: { Accept: 'text/html' } });
        if (!res.ok) return;
        const fresh = new DOMParser().parseFromString(await res.text(), 'text/html');
        if (fresh.body.dataset.runStatus !== 'live') {
          live = false;
          location.reload();
          return;
        }
        const kpis = $('.kpis');
        const freshKpis = fresh.querySelector('.kpis');
        if (kpis && freshKpis) kpis.innerHTML = freshKpis.innerHTML;
        const freshIsland = fresh.getElementById('run-data');
        if (freshIsland) {
          const next = JSON.parse(freshIsland.textContent);
          data.generator = next.generator;
          data.timeseries = next.timeseries;
          data.run = next.run;
          if (state.label) loadSeries(state.label); else { state.series = next.timeseries; drawSeries(); }
          drawGenerator();
        }
      } catch (err) {
        console.warn('harrier: refreshing the live run failed', err);
      } finally {
        refreshing = false;
        if (again && live) { again = false; refreshLive(); }
      }
    }
    on('run_updated', (msg) => {
      if (live && msg && msg.run && String(msg.run.id) === String(data.run && data.run.id)) refreshLive();
    });
    // after a reconnect the socket says resync: fetch what was missed
    on('resync', () => { if (live) refreshLive(); });

    harrier.run = { data, state, redraw: draw, load };
  }

  // ── 8. run edit / delete ─────────────────────────────────────────────
  /** "build=142, env=staging" → {build: "142", env: "staging"}; throws on a pair without "=". */
  function parseTags(text) {
    const tags = {};
    for (const part of String(text || '').split(',')) {
      const p = part.trim();
      if (!p) continue;
      const eq = p.indexOf('=');
      const k = eq < 0 ? '' : p.slice(0, eq).trim();
      if (!k) throw new Error('Tag \u201c' + p + '\u201d is not key=value (write them as build=142, env=staging).');
      tags[k] = p.slice(eq + 1).trim();
    }
    return tags;
  }
  /** {build: "142", env: "staging"} → "build=142, env=staging". */
  const formatTags = (tags) => Object.entries(tags || {}).map(([k, v]) => k + '=' + v).join(', ');

  /**
   * Show a run's (new) name, scenario, notes and tags on the page: #run-name or
   * the h1's first text, document.title, and any [data-run-field="name" |
   * "scenario" | "notes" | "tags"]. Fields missing from `run` are left alone.
   */
  function applyRunFields(run) {
    if (!run) return;
    if (typeof run.name === 'string' && run.name) {
      const nameEl = $('#run-name');
      const h1 = $('.page-header h1') || $('h1');
      if (nameEl) nameEl.textContent = run.name;
      else if (h1) {
        const tn = Array.from(h1.childNodes).find((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
        if (tn) tn.textContent = run.name + ' '; else h1.prepend(run.name + ' ');
      }
      const tail = doc.title.lastIndexOf(' \u00b7 ');
      doc.title = run.name + (tail >= 0 ? doc.title.slice(tail) : '');
    }
    for (const el of $$('[data-run-field]')) {
      const key = el.dataset.runField;
      if (!(key in run)) continue;
      if (key === 'tags') {
        const entries = Object.entries(run.tags || {});
        el.replaceChildren(...(entries.length
          ? entries.flatMap(([k, v], i) => [i ? ' ' : '', h('span', { class: 'badge muted' }, k + '=' + v)])
          : [valueNode(NULL_TEXT)]));
      } else {
        el.replaceChildren(valueNode(run[key] ? String(run[key]) : NULL_TEXT));
      }
    }
  }

  /** The callout area of the edit form: #run-edit-result, or one made after the form. */
  function editResultBox(anchor) {
    let box = $('#run-edit-result');
    if (!box && anchor) {
      box = h('div', { id: 'run-edit-result', class: 'run-edit-result', hidden: true });
      anchor.after(box);
    }
    return {
      show(node) { if (box) { box.replaceChildren(node); box.hidden = false; } },
      clear() { if (box) { box.hidden = true; box.replaceChildren(); } },
    };
  }

  /** Error text of a failed fetch response: its {"error"} or "HTTP 500 …". */
  async function responseError(res) {
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    return (body && body.error) || ('HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : ''));
  }
  const NETWORK_ERROR = 'The connection to the server was lost. Check that harrier is running, then try again.';

  // ── load tests from the console ──────────────────────────────────────
  // form#load-form (Runs page, when [load] enabled = true): mode radios show the
  // [data-mode] fields of the chosen kind; submit → POST /api/v1/load-tests → the new
  // run's page (live). button#load-stop[data-run-id] (run page) → POST …/{id}/stop.
  function initLoadForm(form) {
    const error = $('#load-error');
    const mode = () => (form.querySelector('input[name="mode"]:checked') || {}).value || 'run';
    const showMode = () => {
      for (const el of $$('[data-mode]', form)) el.hidden = el.dataset.mode !== mode();
    };
    form.addEventListener('change', (e) => { if (e.target.name === 'mode') showMode(); });
    showMode();
    // agents come and go: keep their count current while the page is open
    const waiting = $('#load-agents-waiting');
    if (waiting) {
      setInterval(async () => {
        if (doc.hidden) return;
        try {
          const res = await fetch('/api/v1/load-agents', { headers: { Accept: 'application/json' } });
          if (res.ok) waiting.textContent = String(((await res.json()).waiting || []).length);
        } catch (_) { /* offline: keep the last count */ }
      }, 5000);
    }
    const val = (n) => { const el = form.elements.namedItem(n); return el ? String(el.value || '').trim() : ''; };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const button = $('#load-start');
      const body = {
        url: val('url'), mode: mode(), method: val('method'),
        headers: val('headers').split('\n').map((x) => x.trim()).filter(Boolean),
        body: form.elements.namedItem('body').value,
        timeout: val('timeout'), name: val('name'), scenario: val('scenario'),
      };
      if (body.mode === 'find') Object.assign(body, { slo: val('slo'), max_rate: val('max_rate'), max_duration: val('max_duration') });
      else Object.assign(body, { rate: val('rate'), over: val('over'), duration: val('duration') });
      body.agents = Math.max(0, parseInt(val('agents'), 10) || 0);
      if (error) error.hidden = true;
      button.disabled = true;
      form.setAttribute('aria-busy', 'true');
      try {
        const res = await fetch('/api/v1/load-tests', {
          method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body),
        });
        if (res.status === 201) {
          const json = await res.json();
          location.href = json.url;
          return;
        }
        if (error) { error.textContent = 'Not started: ' + await responseError(res); error.hidden = false; }
      } catch (_) {
        if (error) { error.textContent = 'Not started: ' + NETWORK_ERROR; error.hidden = false; }
      }
      button.disabled = false;
      form.removeAttribute('aria-busy');
    });
  }

  function initLoadStop(button) {
    button.addEventListener('click', async () => {
      button.disabled = true;
      button.textContent = 'Stopping\u2026';
      try {
        const res = await fetch('/api/v1/load-tests/' + encodeURIComponent(button.dataset.runId) + '/stop', { method: 'POST', headers: { Accept: 'application/json' } });
        if (!res.ok && res.status !== 404) throw new Error(await responseError(res));
      } catch (err) {
        button.disabled = false;
        button.textContent = 'Stop load test';
        window.alert('Not stopped: ' + (err.message || err));
      }
    });
  }

  function initRunEdit(form) {
    const id = form.dataset.runId || doc.body.dataset.runId;
    const result = editResultBox(form);
    const field = (name) => form.elements.namedItem(name);
    const val = (name) => { const el = field(name); return el && typeof el.value === 'string' ? el.value.trim() : ''; };
    const buttons = () => Array.from(form.querySelectorAll('button, input[type="submit"]'));
    let busy = false;

    form.addEventListener('input', () => { if (!busy) result.clear(); });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (busy || !id) return;
      const name = val('name');
      let tags;
      try {
        if (!name) throw new Error('The name must not be empty.');
        tags = parseTags(val('tags'));
      } catch (err) {
        result.show(h('div', { class: 'callout warn', role: 'alert' }, h('strong', null, 'Not saved'), h('span', null, err.message)));
        return;
      }
      const body = { name, scenario: val('scenario') || null, notes: val('notes') || null, tags };
      busy = true;
      form.setAttribute('aria-busy', 'true');
      for (const b of buttons()) b.disabled = true;
      try {
        const res = await fetch('/api/v1/runs/' + encodeURIComponent(id), {
          method: 'PATCH',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
          body: JSON.stringify(body),
        });
        if (!res.ok) {
          result.show(errorBox('Not saved', await responseError(res)));
          return;
        }
        let run = null;
        try { run = await res.json(); } catch (_) { /* 200 without a body */ }
        run = run && typeof run === 'object' ? run : body;
        applyRunFields(run);
        // show what the server stored (tags normalised, blanks cleared)
        const set = (k, v) => { const el = field(k); if (el) el.value = v; };
        set('name', run.name || name);
        set('scenario', run.scenario || '');
        set('notes', run.notes || '');
        set('tags', formatTags(run.tags || tags));
        result.show(h('div', { class: 'callout ok', role: 'status' }, h('strong', null, 'Saved'), h('span', null, 'Name, scenario, tags and notes are updated.')));
      } catch (_) {
        result.show(errorBox('Not saved', NETWORK_ERROR));
      } finally {
        busy = false;
        form.removeAttribute('aria-busy');
        for (const b of buttons()) b.disabled = false;
      }
    });

    // another tab (or the CLI) renamed this run
    on('run_updated', (msg) => {
      if (msg && msg.run && String(msg.run.id) === String(id)) applyRunFields(msg.run);
    });
  }

  function initRunDelete(button) {
    const id = button.dataset.runId || doc.body.dataset.runId;
    const result = editResultBox(button.closest('form') || button);
    button.addEventListener('click', async () => {
      if (!id || button.disabled) return;
      const nameInput = $('#run-edit-form [name="name"]');
      const name = (nameInput && nameInput.value.trim()) || ('#' + id);
      if (!window.confirm('Delete run \u201c' + name + '\u201d?\n\nIts samples, charts and statistics are removed for good.')) return;
      button.disabled = true;
      try {
        const res = await fetch('/api/v1/runs/' + encodeURIComponent(id), { method: 'DELETE', headers: { Accept: 'application/json' } });
        if (res.ok) {
          location.href = '/console/runs';
          return;
        }
        result.show(errorBox('Not deleted', await responseError(res)));
      } catch (_) {
        result.show(errorBox('Not deleted', NETWORK_ERROR));
      }
      button.disabled = false;
    });
  }

  // ── share links ───────────────────────────────────────────────────────
  // button[data-share-run|data-share-compare|data-share-scenario] → POST
  // /api/v1/share-links; the link (shown once) appears under the page header with a
  // Copy button.
  function initShare(button) {
    button.addEventListener('click', async () => {
      const d = button.dataset;
      const body = d.shareRun ? { run: Number(d.shareRun) }
        : d.shareCompare ? { compare: d.shareCompare.split(',').map(Number) }
        : { scenario: d.shareScenario };
      button.disabled = true;
      let box = $('#share-result');
      if (!box) {
        box = doc.createElement('div');
        box.id = 'share-result';
        box.setAttribute('role', 'status');
        const header = $('.page-header');
        header.parentNode.insertBefore(box, header.nextSibling);
      }
      box.replaceChildren();
      try {
        const res = await fetch('/api/v1/share-links', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
        const json = await res.json().catch(() => ({}));
        if (!res.ok) throw new Error(json.error || ('HTTP ' + res.status));
        const url = json.url.startsWith('http') ? json.url : location.origin + json.url;
        const until = new Date(json.expires_at_ms).toISOString().slice(0, 10);
        box.className = 'callout ok share-result';
        const label = doc.createElement('strong');
        label.textContent = 'Read-only link';
        const input = doc.createElement('input');
        input.type = 'text';
        input.readOnly = true;
        input.value = url;
        input.setAttribute('aria-label', 'Share link');
        const copy = doc.createElement('button');
        copy.type = 'button';
        copy.className = 'button small';
        copy.textContent = 'Copy';
        copy.addEventListener('click', async () => {
          input.select();
          try { await navigator.clipboard.writeText(url); copy.textContent = 'Copied'; } catch (_) { doc.execCommand('copy'); }
        });
        const note = doc.createElement('span');
        note.className = 'hint';
        note.textContent = 'Anyone with it sees this page until ' + until + ' (shown once; revoke it under Admin).';
        box.append(label, input, copy, note);
        input.select();
      } catch (e) {
        box.className = 'callout err share-result';
        box.textContent = 'Share link not created: ' + e.message;
      } finally {
        button.disabled = false;
      }
    });
  }

  // ── boot ──────────────────────────────────────────────────────────────
  const harrier = { fmt, sortTable, resort, localizeTimes, runRow, live, buildCharts, buildDistCharts, buildVsUsers, usersLevels, parseTags, formatTags, toolName,
    alerts: { sevRank, sevClass, setBadge, refreshBadge, toast: alertToast, subject: alertSubject }, alertMarks: window.harrierAlertMarks || null };
  window.harrier = harrier;

  function boot() {
    localizeTimes();
    for (const t of $$('table.sortable')) initSortable(t);
    const runsTable = $('#runs-table');
    if (runsTable) initRunsTable(runsTable);
    const form = $('#upload-form');
    if (form) initUpload(form);
    if (doc.body.dataset.page === 'run') initRunPage();
    const editForm = $('#run-edit-form');
    if (editForm) initRunEdit(editForm);
    const del = $('#run-delete');
    if (del) initRunDelete(del);
    const loadForm = $('#load-form');
    if (loadForm) initLoadForm(loadForm);
    const loadStop = $('#load-stop');
    if (loadStop) initLoadStop(loadStop);
    for (const b of $$('[data-share-run],[data-share-compare],[data-share-scenario]')) initShare(b);
    // one socket per page: pages with live data, and every page with the alerts badge
    if ($('#alerts-badge')) initAlertsUi();
    if (doc.body.hasAttribute('data-live') || $('#alerts-badge')) startLive();
  }

  if (doc.readyState === 'loading') doc.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
