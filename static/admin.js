/* The admin page (/console/admin): form#token-form → POST /api/v1/tokens, the token shown
 * once in #token-result with a Copy button; button[data-revoke] → DELETE its URL, then the
 * page reloads. */
(function () {
  'use strict';
  const doc = document;
  function boot() {
    const form = doc.getElementById('token-form');
    if (form) {
      form.addEventListener('submit', async (ev) => {
        ev.preventDefault();
        const box = doc.getElementById('token-result');
        const data = new FormData(form);
        const body = { name: data.get('name'), scope: data.get('scope'), expires_days: Number(data.get('expires_days') || 0) };
        box.replaceChildren();
        try {
          const res = await fetch('/api/v1/tokens', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body) });
          const json = await res.json().catch(() => ({}));
          if (!res.ok) throw new Error(json.error || ('HTTP ' + res.status));
          box.className = 'callout ok share-result';
          const label = doc.createElement('strong');
          label.textContent = 'Token ' + json.name;
          const input = doc.createElement('input');
          input.type = 'text';
          input.readOnly = true;
          input.value = json.token;
          input.setAttribute('aria-label', 'New token');
          const copy = doc.createElement('button');
          copy.type = 'button';
          copy.className = 'button small';
          copy.textContent = 'Copy';
          copy.addEventListener('click', async () => {
            input.select();
            try { await navigator.clipboard.writeText(json.token); copy.textContent = 'Copied'; } catch (_) { doc.execCommand('copy'); }
          });
          const note = doc.createElement('span');
          note.className = 'hint';
          note.textContent = 'Shown this once: harrier keeps only its hash. Reload to see it listed.';
          box.append(label, input, copy, note);
          input.select();
          form.reset();
        } catch (e) {
          box.className = 'callout err';
          box.textContent = 'Token not created: ' + e.message;
        }
      });
    }
    for (const b of doc.querySelectorAll('button[data-revoke]')) {
      b.addEventListener('click', async () => {
        if (!confirm('Revoke it? Whatever uses it is refused from now on.')) return;
        b.disabled = true;
        const res = await fetch(b.dataset.revoke, { method: 'DELETE' });
        if (res.ok) location.reload();
        else { b.disabled = false; alert('Not revoked: HTTP ' + res.status); }
      });
    }
  }
  if (doc.readyState === 'loading') doc.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
