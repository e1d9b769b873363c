/*!
 * harrier console — the alerts page (/console/alerts). Plain ES2020, loaded with
 * <script defer> before harrier.js; starts on DOMContentLoaded (window.harrier ready).
 * The page reads without it; this adds:
 *
 *  - Live: harrier:alert_firing / alert_resolved / resync, and every 15 s while the
 *    tab is visible, refetch this page and swap #alerts-now, #alerts-history and
 *    table#rules-table (the forms are left alone). time[data-since-ms] reads
 *    "12 s ago" / "4 min 12 s ago", refreshed every second (absolute time in title).
 *  - Silenced marks: GET /api/v1/alerts items with a non-empty silenced_by unhide
 *    .silenced-mark in their row (rows matched by rule and the labels of the row's
 *    button[data-silence-labels]).
 *  - Rule editor (form#rule-form): "New rule", "Edit"/"View" (button[data-edit-rule])
 *    fill it from tr[data-rule] JSON; rules from harrier.toml (origin "config") open
 *    read-only with a note. "Check" → POST /api/v1/alert-rules/validate; "Save" →
 *    validate, then POST /api/v1/alert-rules (new) or PUT /api/v1/alert-rules/{name}.
 *    A 400 {"error", "field"} is shown in p.field-error[data-error-for=field] (the
 *    form-level one, data-error-for="", when the field has no place) and the field
 *    gets aria-invalid. button[data-delete-rule] → confirm() → DELETE.
 *  - Silences (#silences): GET /api/v1/silences → a table (state, matchers, start,
 *    end, comment, created by, Expire for active/pending → DELETE /api/v1/silences/{id});
 *    404 → a note that this server has no silences yet. form#silence-form: matcher
 *    rows (name, op = != =~ !~, value), duration or "until…" (datetime-local),
 *    comment (required) → POST /api/v1/silences; errors by field as for rules.
 *    button[data-silence-labels] ("Silence…" on an alert row) prefills the matchers
 *    with the alert's labels (alertname included) and focuses the comment.
 *  - Channels (#channels): the table is server-rendered (#channels-list, swapped on each
 *    refresh). form#channel-form adds (POST /api/v1/alert-channels) or changes (PUT
 *    /api/v1/alert-channels/{name}) an API channel; "Edit"/"View"
 *    (button[data-edit-channel]) fill it from tr[data-channel] JSON, harrier.toml's
 *    channels (origin "config") read-only. A Slack URL comes masked ("https://host/…");
 *    sent back unchanged, the server keeps the stored one. Errors by field as for rules
 *    (409 "name taken" at the name). button[data-delete-channel] → confirm() → DELETE.
 *    button[data-test-channel] → POST …/{name}/test; the result ({status, error}) is
 *    shown in output.test-result[data-test-result-for=name] (data-state ok|err), kept
 *    across refreshes.
 *  Exposed as window.harrier.alertsPage.
 */
(() => {
  'use strict';

  const doc = document;
  const $ = (sel, root = doc) => root.querySelector(sel);
  const $$ = (sel, root = doc) => Array.from(root.querySelectorAll(sel));
  const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
  const on = (type, fn) => doc.addEventListener('harrier:' + type, (e) => fn(e.detail));
  const REFRESH_MS = 15000;
  const UNITS = { error_pct: '%', errors_per_s: 'per second', throughput_per_s: 'exchanges per second', mean_ms: 'ms', p95_ms: 'ms', p99_ms: 'ms', inflight: 'exchanges', target_down: '1 = down', no_exchanges: '1 = none', pool_usage_pct: '% of the pool max', pool_pending: 'requests waiting / tasks queued' };

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

  /** "12 s ago", "4 min 12 s ago" (as the server renders it). */
  function ago(fmt, ms) {
    const age = Math.max(0, Date.now() - ms);
    return age < 60000 ? Math.floor(age / 1000) + ' s ago' : fmt.duration(age) + ' ago';
  }

  /** Labels as a stable key, without alertname and severity (added for silences). */
  function labelKey(rule, labels) {
    const l = Object.assign({}, labels || {});
    delete l.alertname;
    delete l.severity;
    return rule + '|' + Object.keys(l).sort().map((k) => k + '=' + l[k]).join(',');
  }

  async function responseError(res) {
    try {
      const body = await res.json();
      if (body && body.error) return { message: body.error, field: body.field || null };
    } catch (_) { /* not JSON */ }
    return { message: 'HTTP ' + res.status + ' ' + res.statusText, field: null };
  }

  function start() {
    const H = window.harrier;
    if (!H || doc.body.dataset.page !== 'alerts') return;
    const fmt = H.fmt;

    // ── relative times ────────────────────────────────────────────────────
    function tickSince() {
      for (const el of $$('[data-since-ms]')) {
        const v = Number(el.dataset.sinceMs);
        if (Number.isFinite(v)) el.textContent = ago(fmt, v);
        if (Number.isFinite(v) && !el.dataset.titled) { el.title = fmt.ts(v) + ' (' + fmt.isoUtc(v) + ')'; el.dataset.titled = '1'; }
      }
    }
    setInterval(tickSince, 1000);
    tickSince();

    // ── silenced marks ────────────────────────────────────────────────────
    async function markSilenced() {
      try {
        const res = await fetch('/api/v1/alerts', { headers: { Accept: 'application/json' } });
        if (!res.ok) return;
        const alerts = await res.json();
        H.alerts.setBadge(alerts);
        const silenced = new Set(alerts.filter((a) => Array.isArray(a.silenced_by) && a.silenced_by.length).map((a) => labelKey(a.rule, a.labels)));
        for (const tr of $$('#alerts-table tbody tr')) {
          let labels = {};
          const btn = $('[data-silence-labels]', tr);
          try { labels = JSON.parse((btn && btn.dataset.silenceLabels) || '{}'); } catch (_) { /* keep {} */ }
          const mark = $('.silenced-mark', tr);
          const is = silenced.has(labelKey(tr.dataset.rule, labels));
          if (mark) {
            mark.replaceChildren(...(is ? [' ', h('span', { class: 'badge muted', title: 'A silence matches this alert: no notifications are sent' }, 'silenced')] : []));
            mark.hidden = !is;
          }
          tr.classList.toggle('is-silenced', is);
        }
      } catch (_) { /* marks stay as they are */ }
    }

    // ── live refresh of the server-rendered parts ─────────────────────────
    let refreshTimer = null;
    let refreshing = false;
    async function refresh() {
      if (refreshing) return;
      refreshing = true;
      try {
        const res = await fetch(location.pathname + location.search, { headers: { Accept: 'text/html' } });
        if (!res.ok) return;
        const next = new DOMParser().parseFromString(await res.text(), 'text/html');
        const openDetails = $('#transitions') && $('#transitions').open;
        for (const sel of ['#alerts-now', '#alerts-history']) {
          const cur = $(sel);
          const fresh = $(sel, next);
          if (cur && fresh) cur.replaceChildren(...Array.from(fresh.childNodes).map((n) => doc.adoptNode(n)));
        }
        if ($('#transitions') && openDetails !== undefined && openDetails !== null) $('#transitions').open = openDetails;
        const rules = $('#rules-table');
        const freshRules = $('#rules-table', next);
        if (rules && freshRules) rules.replaceWith(doc.adoptNode(freshRules));
        else if (!rules && freshRules) location.reload();
        swapChannels(next);
        H.localizeTimes($('#alerts-history') || doc);
        tickSince();
        await markSilenced();
      } catch (_) { /* the next event or tick tries again */ } finally {
        refreshing = false;
      }
    }
    // ── channels table (server-rendered) ──────────────────────────────────
    /** Test results by channel name: {text, state}; shown again after each swap. */
    const testResults = new Map();
    function showTestResult(name) {
      const r = testResults.get(name);
      const out = $('output.test-result[data-test-result-for="' + CSS.escape(name) + '"]');
      if (!out || !r) return;
      out.textContent = r.text;
      out.title = r.text;
      out.dataset.state = r.state;
      out.hidden = false;
    }
    function swapChannels(next) {
      const cur = $('#channels-list');
      const fresh = $('#channels-list', next);
      if (cur && fresh) cur.replaceChildren(...Array.from(fresh.childNodes).map((n) => doc.adoptNode(n)));
      const count = $('#channels-h .count');
      const freshCount = $('#channels-h .count', next);
      if (count && freshCount) count.textContent = freshCount.textContent;
      for (const name of testResults.keys()) showTestResult(name);
      tickSince();
    }
    async function refreshChannels() {
      try {
        const res = await fetch(location.pathname + location.search, { headers: { Accept: 'text/html' } });
        if (!res.ok) return;
        swapChannels(new DOMParser().parseFromString(await res.text(), 'text/html'));
      } catch (_) { /* the next refresh tries again */ }
    }

    function soon() { clearTimeout(refreshTimer); refreshTimer = setTimeout(refresh, 300); }
    on('alert_firing', soon);
    on('alert_resolved', soon);
    on('resync', soon);
    setInterval(() => { if (doc.visibilityState === 'visible') refresh(); }, REFRESH_MS);

    // ── errors next to fields ─────────────────────────────────────────────
    function clearErrors(form) {
      for (const p of $$('.field-error', form)) { p.hidden = true; p.textContent = ''; }
      for (const el of $$('[aria-invalid]', form)) el.removeAttribute('aria-invalid');
    }
    /** The message without what the field's place already says: `alert rule "X": threshold: `,
     *  serde's `… target type: for: ` prefix and its JSON position. */
    function fieldMessage(field, message) {
      let m = String(message);
      if (field) {
        const at = m.indexOf(': ' + field + ': ');
        if (at >= 0) m = m.slice(at + field.length + 4);
        else if (m.startsWith('silence: ')) m = m.slice(9);
      }
      return m.replace(/ at line \d+ column \d+$/, '');
    }

    function showError(form, field, message) {
      let p = field !== null && field !== undefined ? $('.field-error[data-error-for="' + CSS.escape(field) + '"]', form) : null;
      // "subject.labels.instance" → subject.labels; "matchers[0].value" → matchers
      if (!p && field) p = $('.field-error[data-error-for="' + CSS.escape(field.replace(/\[\d+\].*$/, '').split('.').slice(0, 2).join('.')) + '"]', form);
      if (!p && field) p = $('.field-error[data-error-for="' + CSS.escape(field.split(/[.[]/)[0]) + '"]', form);
      if (!p) p = $('.field-error[data-error-for=""]', form);
      const own = p.dataset.errorFor !== '';
      p.textContent = own ? fieldMessage(field, message) : message;
      p.title = message;
      p.hidden = false;
      const input = p.closest('.field') && $('input, select, textarea', p.closest('.field'));
      if (input) { input.setAttribute('aria-invalid', 'true'); input.focus(); }
      return p;
    }

    // ── rule editor ───────────────────────────────────────────────────────
    const form = $('#rule-form');
    const status = $('#rule-status');
    const title = $('#rule-editor-title');
    const readonlyNote = $('#rule-readonly');
    const field = (name) => form.elements.namedItem(name);

    function setUnit() {
      const unit = $('#rf-unit');
      if (unit) unit.textContent = UNITS[field('measure').value] || '';
    }

    function fillRule(rule, origin) {
      clearErrors(form);
      const r = rule || {};
      const s = r.subject || {};
      field('original').value = rule && origin !== undefined ? r.name : '';
      field('name').value = r.name || '';
      field('severity').value = r.severity || 'warning';
      field('subject.service').value = s.service || '';
      field('subject.route').value = s.route || '';
      field('subject.labels').value = Object.entries(s.labels || {}).map(([k, v]) => k + '=' + v).join(', ');
      field('subject.scenario').value = s.scenario || '';
      field('measure').value = r.measure || 'error_pct';
      field('comparison').value = r.comparison || '>';
      field('threshold').value = isNum(r.threshold) ? String(r.threshold) : '5';
      field('recovery_threshold').value = isNum(r.recovery_threshold) ? String(r.recovery_threshold) : '';
      field('window').value = r.window || '5m';
      field('for').value = r.for || (rule ? '0s' : '2m');
      field('keep_firing_for').value = r.keep_firing_for || '0s';
      field('min_count').value = isNum(r.min_count) ? String(r.min_count) : '20';
      field('summary').value = r.summary || '';
      field('description').value = r.description || '';
      const readOnly = origin === 'config';
      for (const el of Array.from(form.elements)) if (el.name !== 'original') el.disabled = readOnly;
      readonlyNote.hidden = !readOnly;
      title.textContent = !rule ? 'New rule' : readOnly ? 'Rule ' + r.name + ' (harrier.toml)' : 'Edit rule ' + r.name;
      $('#rule-save').textContent = rule && origin !== undefined ? 'Save changes' : 'Save rule';
      status.textContent = '';
      setUnit();
    }

    /** The form as a rule (JSON body); a local problem is returned as {field, message}. */
    function ruleFromForm() {
      const text = (n) => field(n).value.trim();
      const subject = {};
      if (text('subject.service')) subject.service = text('subject.service');
      if (text('subject.route')) subject.route = text('subject.route');
      if (text('subject.scenario')) subject.scenario = text('subject.scenario');
      if (text('subject.labels')) {
        const labels = {};
        for (const pair of text('subject.labels').split(',').map((p) => p.trim()).filter(Boolean)) {
          const i = pair.indexOf('=');
          if (i <= 0) return { error: { field: 'subject.labels', message: 'write labels as name=value, name=value; "' + pair + '" has no name=' } };
          labels[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
        }
        subject.labels = labels;
      }
      const num = (n) => (text(n) === '' ? null : Number(text(n)));
      const rule = {
        name: text('name'), subject, measure: field('measure').value, comparison: field('comparison').value,
        threshold: num('threshold'), window: text('window') || '5m', for: text('for') || '0s',
        keep_firing_for: text('keep_firing_for') || '0s', min_count: num('min_count') === null ? 20 : num('min_count'),
        severity: text('severity') || 'warning',
      };
      if (rule.threshold === null || !Number.isFinite(rule.threshold)) return { error: { field: 'threshold', message: 'threshold: enter a number' } };
      if (!Number.isInteger(rule.min_count) || rule.min_count < 0) return { error: { field: 'min_count', message: 'min. exchanges: enter a whole number, 0 or more' } };
      const rec = num('recovery_threshold');
      if (rec !== null) {
        if (!Number.isFinite(rec)) return { error: { field: 'recovery_threshold', message: 'recovery threshold: enter a number or leave it empty' } };
        rule.recovery_threshold = rec;
      }
      if (text('summary')) rule.summary = text('summary');
      if (text('description')) rule.description = text('description');
      return { rule };
    }

    async function send(method, url, body) {
      return fetch(url, { method, headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    }

    /** Validates on the server; true when the rule is fine (errors are shown). */
    async function check(rule) {
      const res = await send('POST', '/api/v1/alert-rules/validate', rule);
      if (res.ok) return true;
      const e = await responseError(res);
      showError(form, e.field, e.message);
      return false;
    }

    async function submit(save) {
      clearErrors(form);
      status.textContent = '';
      const built = ruleFromForm();
      if (built.error) { showError(form, built.error.field, built.error.message); return; }
      try {
        status.textContent = 'Checking\u2026';
        if (!(await check(built.rule))) { status.textContent = ''; return; }
        if (!save) { status.textContent = 'Valid: nothing saved yet.'; return; }
        const original = field('original').value;
        const res = original
          ? await send('PUT', '/api/v1/alert-rules/' + encodeURIComponent(original), built.rule)
          : await send('POST', '/api/v1/alert-rules', built.rule);
        if (!res.ok) {
          const e = await responseError(res);
          status.textContent = '';
          showError(form, e.field, e.message);
          return;
        }
        const stored = await res.json();
        fillRule(stored, stored.origin);
        status.textContent = 'Saved ' + stored.name + '.';
        await refresh();
      } catch (err) {
        status.textContent = '';
        showError(form, null, 'Could not reach the server: ' + (err.message || err));
      }
    }

    if (form) {
      form.addEventListener('submit', (ev) => { ev.preventDefault(); submit(true); });
      $('#rule-check').addEventListener('click', () => submit(false));
      $('#rule-reset').addEventListener('click', () => fillRule(null));
      field('measure').addEventListener('change', setUnit);
      $('#rule-new').addEventListener('click', () => { fillRule(null); $('#rule-editor').scrollIntoView({ block: 'start' }); field('name').focus(); });
      doc.addEventListener('click', async (ev) => {
        const edit = ev.target.closest('[data-edit-rule]');
        if (edit) {
          const tr = edit.closest('tr');
          let rule = null;
          try { rule = JSON.parse(tr.dataset.rule); } catch (_) { return; }
          fillRule(rule, tr.dataset.origin);
          $('#rule-editor').scrollIntoView({ block: 'start' });
          if (tr.dataset.origin !== 'config') field('name').focus();
          return;
        }
        const del = ev.target.closest('[data-delete-rule]');
        if (del) {
          const name = del.dataset.deleteRule;
          if (!window.confirm('Delete the alert rule ' + name + '? Its alerts end without a resolved notice.')) return;
          del.disabled = true;
          try {
            const res = await fetch('/api/v1/alert-rules/' + encodeURIComponent(name), { method: 'DELETE' });
            if (!res.ok) { const e = await responseError(res); status.textContent = e.message; del.disabled = false; return; }
            status.textContent = 'Deleted ' + name + '.';
            if (field('original').value === name) fillRule(null);
            await refresh();
          } catch (err) {
            del.disabled = false;
            status.textContent = 'Could not reach the server: ' + (err.message || err);
          }
        }
      });
      setUnit();
    }

    // ── channel editor ────────────────────────────────────────────────────
    const cForm = $('#channel-form');
    const cStatus = $('#channel-status');
    const cField = (name) => cForm.elements.namedItem(name);
    const URL_HINTS = {
      webhook: 'Alertmanager-compatible webhook receiver',
      slack: 'Slack incoming webhook (a secret: shown masked)',
      alertmanager: "Alertmanager's base URL (alerts go to /api/v2/alerts)",
    };
    const URL_EXAMPLES = { webhook: 'http://127.0.0.1:9095/hook', slack: 'https://hooks.slack.com/services/T…/B…/…', alertmanager: 'http://127.0.0.1:9093' };
    const GROUP_FIELDS = ['group_by', 'group_wait', 'group_interval', 'repeat_interval'];
    let channelReadOnly = false;

    function setKind() {
      const kind = cField('kind').value;
      $('#cf-url-hint').textContent = URL_HINTS[kind] || '';
      cField('url').placeholder = URL_EXAMPLES[kind] || '';
      // Alertmanager groups by itself: harrier pushes at once and every minute.
      for (const n of GROUP_FIELDS) cField(n).disabled = channelReadOnly || kind === 'alertmanager';
    }

    function fillChannel(ch, origin) {
      clearErrors(cForm);
      const c = ch || {};
      const editing = Boolean(ch) && origin !== undefined;
      cField('original').value = editing ? c.name : '';
      cField('name').value = c.name || '';
      cField('kind').value = c.kind || 'webhook';
      cField('url').value = c.url || '';
      cField('matchers').value = (c.matchers || []).join('\n');
      cField('group_by').value = (c.group_by || ['alertname']).join(', ');
      cField('timeout_s').value = isNum(c.timeout_s) ? String(c.timeout_s) : '10';
      cField('group_wait').value = c.group_wait || '30s';
      cField('group_interval').value = c.group_interval || '5m';
      cField('repeat_interval').value = c.repeat_interval || '4h';
      cField('send_resolved').checked = c.send_resolved !== false;
      channelReadOnly = origin === 'config';
      for (const el of Array.from(cForm.elements)) if (el.name !== 'original') el.disabled = channelReadOnly;
      $('#channel-readonly').hidden = !channelReadOnly;
      $('#cf-url-kept').hidden = !(editing && String(c.url || '').includes('\u2026'));
      $('#channel-editor-title').textContent = !ch ? 'New channel' : channelReadOnly ? 'Channel ' + c.name + ' (harrier.toml)' : 'Edit channel ' + c.name;
      $('#channel-save').textContent = editing ? 'Save changes' : 'Save channel';
      cStatus.textContent = '';
      setKind();
    }

    /** The form as a channel (JSON body); a local problem is returned as {field, message}. */
    function channelFromForm() {
      const text = (n) => cField(n).value.trim();
      const timeout = text('timeout_s') === '' ? 10 : Number(text('timeout_s'));
      if (!Number.isFinite(timeout)) return { error: { field: 'timeout_s', message: 'timeout: enter a number of seconds' } };
      return {
        channel: {
          name: text('name'),
          kind: cField('kind').value,
          url: text('url'),
          timeout_s: timeout,
          matchers: cField('matchers').value.split('\n').map((m) => m.trim()).filter(Boolean),
          group_by: text('group_by').split(',').map((l) => l.trim()).filter(Boolean),
          group_wait: text('group_wait') || '30s',
          group_interval: text('group_interval') || '5m',
          repeat_interval: text('repeat_interval') || '4h',
          send_resolved: cField('send_resolved').checked,
        },
      };
    }

    async function submitChannel() {
      clearErrors(cForm);
      cStatus.textContent = '';
      const built = channelFromForm();
      if (built.error) { showError(cForm, built.error.field, built.error.message); return; }
      const original = cField('original').value;
      try {
        cStatus.textContent = 'Saving\u2026';
        const res = original
          ? await send('PUT', '/api/v1/alert-channels/' + encodeURIComponent(original), built.channel)
          : await send('POST', '/api/v1/alert-channels', built.channel);
        if (!res.ok) {
          const e = await responseError(res);
          cStatus.textContent = '';
          showError(cForm, e.field, e.message);
          return;
        }
        const view = await res.json();
        fillChannel(view.channel, view.origin);
        cStatus.textContent = 'Saved ' + view.channel.name + '. It gets the next notifications.';
        await refreshChannels();
      } catch (err) {
        cStatus.textContent = '';
        showError(cForm, null, 'Could not reach the server: ' + (err.message || err));
      }
    }

    async function testChannel(button) {
      const name = button.dataset.testChannel;
      button.disabled = true;
      testResults.set(name, { text: 'Sending\u2026', state: 'pending' });
      showTestResult(name);
      try {
        const res = await fetch('/api/v1/alert-channels/' + encodeURIComponent(name) + '/test', { method: 'POST', headers: { Accept: 'application/json' } });
        if (!res.ok) {
          testResults.set(name, { text: 'Not sent: ' + (await responseError(res)).message, state: 'err' });
        } else {
          const r = await res.json();
          const status = isNum(r.status) ? 'HTTP ' + r.status : 'no answer';
          testResults.set(name, r.error
            ? { text: 'Test failed (' + status + '): ' + r.error, state: 'err' }
            : { text: 'Test delivered (' + status + ')', state: 'ok' });
        }
      } catch (err) {
        testResults.set(name, { text: 'Could not reach the server: ' + (err.message || err), state: 'err' });
      }
      showTestResult(name);
      button.disabled = false;
      await refreshChannels();
    }

    if (cForm) {
      cForm.addEventListener('submit', (ev) => { ev.preventDefault(); submitChannel(); });
      $('#channel-reset').addEventListener('click', () => fillChannel(null));
      cField('kind').addEventListener('change', setKind);
      $('#channel-new').addEventListener('click', () => { fillChannel(null); $('#channel-editor').scrollIntoView({ block: 'start' }); cField('name').focus(); });
      doc.addEventListener('click', async (ev) => {
        const test = ev.target.closest('[data-test-channel]');
        if (test) { await testChannel(test); return; }
        const edit = ev.target.closest('[data-edit-channel]');
        if (edit) {
          const tr = edit.closest('tr');
          let ch = null;
          try { ch = JSON.parse(tr.dataset.channel); } catch (_) { return; }
          fillChannel(ch, tr.dataset.origin);
          $('#channel-editor').scrollIntoView({ block: 'start' });
          if (tr.dataset.origin !== 'config') cField('name').focus();
          return;
        }
        const del = ev.target.closest('[data-delete-channel]');
        if (del) {
          const name = del.dataset.deleteChannel;
          if (!window.confirm('Delete the channel ' + name + '? It gets no more notifications; its pending groups are dropped.')) return;
          del.disabled = true;
          try {
            const res = await fetch('/api/v1/alert-channels/' + encodeURIComponent(name), { method: 'DELETE' });
            if (!res.ok) { cStatus.textContent = (await responseError(res)).message; del.disabled = false; return; }
            cStatus.textContent = 'Deleted ' + name + '.';
            testResults.delete(name);
            if (cField('original').value === name) fillChannel(null);
            await refreshChannels();
          } catch (err) {
            del.disabled = false;
            cStatus.textContent = 'Could not reach the server: ' + (err.message || err);
          }
        }
      });
      setKind();
    }

    // ── silences ──────────────────────────────────────────────────────────
    const sForm = $('#silence-form');
    const sList = $('#silences-list');
    const sStatus = $('#silence-status');
    const rows = $('#matcher-rows');

    function matcherRow(m) {
      const row = h('div', { class: 'matcher-row' },
        h('input', { type: 'text', name: 'm-name', 'aria-label': 'Label name', placeholder: 'alertname', value: (m && m.name) || '' }),
        (() => {
          const sel = h('select', { name: 'm-op', 'aria-label': 'Operator' }, ...['=', '!=', '=~', '!~'].map((op) => h('option', { value: op }, op)));
          sel.value = (m && m.op) || '=';
          return sel;
        })(),
        h('input', { type: 'text', name: 'm-value', 'aria-label': 'Value', placeholder: 'value or regex', value: (m && m.value) || '' }),
        h('button', { type: 'button', class: 'button small', 'aria-label': 'Remove matcher', 'data-remove-matcher': '' }, '\u00d7'));
      return row;
    }
    function setMatchers(ms) {
      rows.replaceChildren(...(ms.length ? ms : [null]).map(matcherRow));
    }

    function silenceState(s) {
      const cls = s.state === 'active' ? 'ok' : s.state === 'pending' ? 'info' : 'muted';
      return h('span', { class: 'badge ' + cls }, s.state);
    }

    async function loadSilences() {
      if (!sList) return;
      try {
        const res = await fetch('/api/v1/silences', { headers: { Accept: 'application/json' } });
        if (res.status === 404) {
          sList.replaceChildren(h('div', { class: 'empty compact', id: 'silences-unavailable' },
            h('p', { class: 'empty-title' }, 'Silences are not available on this server'),
            h('p', null, 'This harrier has no /api/v1/silences yet; notifications cannot be muted here.')));
          return;
        }
        if (!res.ok) throw new Error((await responseError(res)).message);
        const list = await res.json();
        if (!list.length) {
          sList.replaceChildren(h('div', { class: 'empty compact', id: 'silences-empty' },
            h('p', { class: 'empty-title' }, 'No silences'),
            h('p', null, 'Mute alerts by their labels for a while, e.g. during a deploy: use "Silence\u2026" on an alert or the form below.')));
          return;
        }
        const table = h('table', { class: 'data', id: 'silences-table' },
          h('thead', null, h('tr', null, ...['State', 'Matchers', 'Starts', 'Ends', 'Comment', 'Created by', ''].map((t, i) =>
            h('th', { scope: 'col', class: i === 2 || i === 3 ? 'num' : null }, t || h('span', { class: 'visually-hidden' }, 'Actions'))))),
          h('tbody', null, ...list.map((s) => h('tr', { 'data-silence-id': s.id, 'data-state': s.state },
            h('td', null, silenceState(s)),
            h('td', { class: 'matchers-cell' }, ...(s.matchers || []).map((m) => h('code', { class: 'matcher' }, m.name + m.op + JSON.stringify(m.value)))),
            h('td', { class: 'num' }, h('time', { title: fmt.isoUtc(s.starts_at_ms) }, fmt.ts(s.starts_at_ms))),
            h('td', { class: 'num' }, h('time', { title: fmt.isoUtc(s.ends_at_ms) }, fmt.ts(s.ends_at_ms))),
            h('td', { class: 'wrap' }, s.comment || ''),
            h('td', null, s.created_by || h('span', { class: 'num-null' }, fmt.NULL)),
            h('td', { class: 'row-actions' }, s.state === 'expired' ? null
              : h('button', { type: 'button', class: 'button small danger', 'data-expire-silence': s.id }, 'Expire'))))));
        sList.replaceChildren(h('div', { class: 'table-wrap no-max' }, table));
      } catch (err) {
        sList.replaceChildren(h('div', { class: 'callout err', role: 'alert' }, h('strong', null, 'Could not load the silences'), h('span', null, String(err.message || err))));
      }
    }

    function localInputToMs(v) {
      const t = new Date(v).getTime();
      return Number.isFinite(t) ? t : null;
    }

    async function submitSilence() {
      clearErrors(sForm);
      sStatus.textContent = '';
      const matchers = [];
      for (const row of $$('.matcher-row', rows)) {
        const name = $('[name="m-name"]', row).value.trim();
        const value = $('[name="m-value"]', row).value;
        const op = $('[name="m-op"]', row).value;
        if (!name && !value) continue;
        if (!name) { showError(sForm, 'matchers', 'every matcher needs a label name'); return; }
        matchers.push({ name, op, value });
      }
      if (!matchers.length) { showError(sForm, 'matchers', 'add at least one matcher (for example alertname = the rule)'); return; }
      const comment = sForm.elements.namedItem('comment').value.trim();
      if (!comment) { showError(sForm, 'comment', 'a comment is required: say why these alerts are muted'); return; }
      const body = { matchers, comment };
      const by = sForm.elements.namedItem('created_by').value.trim();
      if (by) body.created_by = by;
      const duration = sForm.elements.namedItem('duration').value;
      if (duration) body.duration = duration;
      else {
        const ends = localInputToMs(sForm.elements.namedItem('ends_at').value);
        if (ends === null) { showError(sForm, 'ends_at_ms', 'pick an end time, or a duration'); return; }
        body.ends_at_ms = ends;
      }
      try {
        const res = await fetch('/api/v1/silences', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
        if (!res.ok) {
          const e = await responseError(res);
          if (res.status === 404 || res.status === 405) { showError(sForm, null, 'This server has no silences API yet.'); return; }
          // "silence: comment: required…", "silence: matchers[0]: bad regex …"
          const prefix = /^silence: ([a-z_]+)/.exec(e.message);
          const named = e.field || (prefix && prefix[1]) || ['matchers', 'comment', 'ends_at_ms', 'starts_at_ms', 'duration'].find((f) => e.message.includes(f)) || null;
          showError(sForm, named, e.message);
          return;
        }
        const s = await res.json();
        sStatus.textContent = 'Silence ' + s.id + ' created, ' + s.state + ' until ' + fmt.ts(s.ends_at_ms) + '.';
        setMatchers([]);
        sForm.elements.namedItem('comment').value = '';
        await loadSilences();
        await markSilenced();
      } catch (err) {
        showError(sForm, null, 'Could not reach the server: ' + (err.message || err));
      }
    }

    if (sForm) {
      setMatchers([]);
      sForm.addEventListener('submit', (ev) => { ev.preventDefault(); submitSilence(); });
      $('#matcher-add').addEventListener('click', () => rows.append(matcherRow(null)));
      const durationSel = sForm.elements.namedItem('duration');
      durationSel.addEventListener('change', () => {
        const until = sForm.elements.namedItem('ends_at');
        until.disabled = durationSel.value !== '';
        if (!until.disabled && !until.value) {
          const d = new Date(Date.now() + 2 * 3600e3);
          d.setSeconds(0, 0);
          until.value = new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
        }
      });
      doc.addEventListener('click', async (ev) => {
        const rm = ev.target.closest('[data-remove-matcher]');
        if (rm) { rm.closest('.matcher-row').remove(); if (!rows.children.length) setMatchers([]); return; }
        const pre = ev.target.closest('[data-silence-labels]');
        if (pre) {
          let labels = {};
          try { labels = JSON.parse(pre.dataset.silenceLabels); } catch (_) { /* none */ }
          const keys = Object.keys(labels).sort((a, b) => (a === 'alertname' ? -1 : b === 'alertname' ? 1 : a.localeCompare(b)));
          setMatchers(keys.map((k) => ({ name: k, op: '=', value: labels[k] })));
          clearErrors(sForm);
          $('#silences').scrollIntoView({ block: 'start' });
          sForm.elements.namedItem('comment').focus();
          return;
        }
        const exp = ev.target.closest('[data-expire-silence]');
        if (exp) {
          if (!window.confirm('Expire silence ' + exp.dataset.expireSilence + ' now? Its alerts notify again.')) return;
          exp.disabled = true;
          try {
            const res = await fetch('/api/v1/silences/' + encodeURIComponent(exp.dataset.expireSilence), { method: 'DELETE' });
            if (!res.ok) { sStatus.textContent = (await responseError(res)).message; exp.disabled = false; return; }
            sStatus.textContent = 'Silence ' + exp.dataset.expireSilence + ' expired.';
            await loadSilences();
            await markSilenced();
          } catch (err) {
            exp.disabled = false;
            sStatus.textContent = 'Could not reach the server: ' + (err.message || err);
          }
        }
      });
      loadSilences();
    }
    markSilenced();

    H.alertsPage = { refresh, loadSilences, markSilenced, fillRule, ruleFromForm, fillChannel, channelFromForm, refreshChannels };
  }

  if (window.harrier) start();
  else doc.addEventListener('DOMContentLoaded', start);
})();
