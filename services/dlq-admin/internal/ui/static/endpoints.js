// The page's Endpoints view: outbound endpoints with their health, one
// endpoint's deliveries and attempts (newest first, "older" pages), and an
// operator's actions: re-send a delivery, recover since, rotate the secret
// (the new secret shown once), disable and enable. The same rules as
// payouts.js:
//  - it acts only on the endpoint shown: ep.shown is set once its fetch
//    succeeded and rendered; switching clears the dialog, the result and
//    any secret on screen;
//  - a request that changes something disables its button until the
//    answer is in (a double click is one POST);
//  - viewers see no write control; the DOM is built with textContent only.
'use strict';

(function () {
  const TOKEN_KEY = 'aegis.dlq-admin.token';
  const ep = {
    active: false, me: null, items: [], shown: null, seq: 0, busy: false,
    deliveriesBefore: null, attemptsBefore: null,
  };
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function badge(text) { return el('span', text || '—', 'badge ' + (text || 'other')); }
  function utc(iso) { return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', ' UTC') : '—'; }

  async function api(method, path, body) {
    const opts = { method: method, headers: { Authorization: 'Bearer ' + (sessionStorage.getItem(TOKEN_KEY) || '') } };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let res;
    try { res = await fetch(path, opts); } catch (e) {
      return { status: 0, ok: false, data: { error: { code: 'network', message: 'dlq-admin did not answer: ' + e.message } } };
    }
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return { status: res.status, ok: res.ok, data: data };
  }
  function describe(r) {
    const e = r.data && r.data.error;
    return e ? r.status + ' ' + e.code + ': ' + e.message : 'HTTP ' + r.status;
  }
  function canWrite() { return ep.me && ep.me.role === 'operator'; }
  function applyRole() {
    for (const e of document.querySelectorAll('.write-ep')) e.hidden = !canWrite();
  }
  function result(kind, text) {
    const r = $('ep-result');
    r.className = 'result ' + kind;
    r.textContent = text;
    r.hidden = !text;
  }
  function health(e) {
    if (!e.enabled) return 'disabled';
    return e.failing_since ? 'failing' : 'healthy';
  }
  function path(id, rest) { return '/v1/outbound/endpoints/' + encodeURIComponent(id) + (rest ? '/' + rest : ''); }

  // ---- view switching: the letters' views stay app.js's ----

  function activate(push) {
    ep.active = true;
    document.body.classList.add('endpoints-mode');
    $('endpoints-view').hidden = false;
    for (const id of ['view-letters', 'view-groups', 'view-payouts']) $(id).setAttribute('aria-pressed', 'false');
    $('view-endpoints').setAttribute('aria-pressed', 'true');
    if (push) {
      const q = new URLSearchParams(location.search);
      q.set('view', 'endpoints');
      q.delete('letter');
      history.pushState({}, '', location.pathname + '?' + q.toString());
    }
    load();
  }
  function deactivate() {
    ep.active = false;
    document.body.classList.remove('endpoints-mode');
    $('endpoints-view').hidden = true;
    $('view-endpoints').setAttribute('aria-pressed', 'false');
    hideSecret();
  }

  async function load() {
    if (!sessionStorage.getItem(TOKEN_KEY)) {
      $('ep-list-status').textContent = 'Enter a token to load endpoints.';
      return;
    }
    const me = await api('GET', '/v1/me');
    if (me.ok) ep.me = me.data;
    applyRole();
    await loadList();
    if (ep.shown) open(ep.shown.id, false);
  }

  // ---- list ----

  async function loadList() {
    $('ep-list-status').textContent = 'Loading…';
    const r = await api('GET', '/v1/outbound/endpoints');
    if (!r.ok) {
      $('ep-list-status').textContent = 'Could not load endpoints: ' + describe(r);
      return;
    }
    ep.items = r.data.items;
    const body = $('ep-rows');
    body.replaceChildren();
    if (!ep.items.length) {
      const tr = el('tr');
      const td = el('td', 'No endpoint yet: aegisctl endpoints create --url … registers one.', 'muted');
      td.colSpan = 6;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    for (const e of ep.items) {
      const tr = el('tr');
      tr.dataset.id = e.id;
      tr.tabIndex = 0;
      tr.setAttribute('aria-selected', ep.shown && ep.shown.id === e.id ? 'true' : 'false');
      tr.appendChild(el('td', e.url, 'mono'));
      const h = el('td');
      h.appendChild(badge(health(e)));
      if (e.failing_since) h.appendChild(el('small', ' since ' + utc(e.failing_since), 'muted'));
      tr.appendChild(h);
      tr.appendChild(el('td', e.event_types.length ? e.event_types.join(', ') : 'all'));
      tr.appendChild(el('td', e.pending));
      tr.appendChild(el('td', utc(e.oldest_pending_at)));
      tr.appendChild(el('td', e.description));
      tr.addEventListener('click', () => open(e.id, true));
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') open(e.id, true); });
      body.appendChild(tr);
    }
    $('ep-list-status').textContent = ep.items.length + ' endpoint' + (ep.items.length === 1 ? '' : 's') + ', as of ' +
      new Date().toISOString().slice(11, 19) + ' UTC';
  }

  // ---- one endpoint ----

  async function open(id, fresh) {
    const seq = ++ep.seq;
    if (fresh) {
      ep.shown = null;
      hideSecret();
      result('', '');
      $('ep-confirm').hidden = true;
      $('ep-reason').value = '';
      $('ep-since').value = '';
    }
    for (const tr of $('ep-rows').children) tr.setAttribute('aria-selected', tr.dataset.id === id ? 'true' : 'false');
    $('ep-layout').classList.remove('closed');
    $('ep-detail').hidden = false;
    $('ep-loading').textContent = 'Loading…';
    $('ep-loading').hidden = false;
    const r = await api('GET', path(id));
    if (seq !== ep.seq) return; // another endpoint was opened meanwhile
    $('ep-loading').hidden = true;
    if (!r.ok) {
      result('fail', 'Could not load the endpoint: ' + describe(r));
      return;
    }
    render(r.data);
    ep.shown = r.data;
    await Promise.all([loadDeliveries(false), loadAttempts(false)]);
  }

  function render(e) {
    $('ep-title').textContent = e.url;
    const b = $('ep-badge');
    b.className = 'badge ' + health(e);
    b.textContent = health(e);
    const dl = $('ep-fields');
    dl.replaceChildren();
    const field = (k, v) => { dl.appendChild(el('dt', k)); dl.appendChild(el('dd', v === null || v === undefined || v === '' ? '—' : v)); };
    field('Id', e.id);
    field('Description', e.description);
    field('Event types', e.event_types.length ? e.event_types.join(', ') : 'every type');
    field('Rate limit', e.rate_limit ? e.rate_limit + ' per second' : 'none');
    field('Failing since', utc(e.failing_since));
    field('Last success', utc(e.last_success_at));
    field('Pending', e.pending + (e.oldest_pending_at ? ' (oldest ' + utc(e.oldest_pending_at) + ')' : ''));
    if (!e.enabled) field('Disabled', utc(e.disabled_at) + ' by ' + (e.disabled_by || '—') + ': ' + (e.disabled_reason || ''));
    field('Previous secret signs until', utc(e.previous_secret_expires_at));
    field('Legacy Aegis-Signature', e.has_legacy_secret ? 'on' : 'off');
    field('Created', utc(e.created_at) + ' by ' + e.created_by);
    $('ep-disable').hidden = !e.enabled;
    $('ep-enable').hidden = e.enabled;
  }

  async function loadDeliveries(more) {
    if (!ep.shown) return;
    const id = ep.shown.id;
    const q = new URLSearchParams({ limit: '25' });
    if ($('ep-state').value) q.set('state', $('ep-state').value);
    if (more && ep.deliveriesBefore) q.set('before_id', String(ep.deliveriesBefore));
    const r = await api('GET', path(id, 'deliveries') + '?' + q.toString());
    if (!ep.shown || ep.shown.id !== id) return;
    const body = $('ep-delivery-rows');
    if (!more) body.replaceChildren();
    if (!r.ok) {
      result('fail', 'Could not load deliveries: ' + describe(r));
      return;
    }
    for (const d of r.data.items) body.appendChild(deliveryRow(d));
    ep.deliveriesBefore = r.data.next_before_id;
    $('ep-deliveries-more').hidden = !r.data.next_before_id;
  }

  function deliveryRow(d) {
    const tr = el('tr');
    tr.dataset.id = String(d.id);
    tr.appendChild(el('td', '#' + d.id));
    tr.appendChild(el('td', d.message_id));
    const st = el('td');
    st.appendChild(badge(d.state));
    tr.appendChild(st);
    tr.appendChild(el('td', d.attempts));
    tr.appendChild(el('td', d.state === 'pending' ? utc(d.next_attempt_at) : utc(d.finished_at)));
    tr.appendChild(el('td', (d.last_status ? d.last_status + ' ' : '') + (d.last_error || '')));
    const td = el('td');
    if (canWrite() && d.state !== 'succeeded') {
      const b = el('button', 'Re-send', 'btn');
      b.type = 'button';
      b.setAttribute('aria-label', 'Re-send delivery #' + d.id);
      b.addEventListener('click', () => resend(d.id, b));
      td.appendChild(b);
    }
    tr.appendChild(td);
    return tr;
  }

  async function loadAttempts(more) {
    if (!ep.shown) return;
    const id = ep.shown.id;
    const q = new URLSearchParams({ limit: '25' });
    if (more && ep.attemptsBefore) q.set('before_id', String(ep.attemptsBefore));
    const r = await api('GET', path(id, 'attempts') + '?' + q.toString());
    if (!ep.shown || ep.shown.id !== id) return;
    const body = $('ep-attempt-rows');
    if (!more) body.replaceChildren();
    if (!r.ok) {
      result('fail', 'Could not load attempts: ' + describe(r));
      return;
    }
    for (const a of r.data.items) {
      const tr = el('tr');
      tr.dataset.id = String(a.id);
      tr.appendChild(el('td', utc(a.attempted_at)));
      tr.appendChild(el('td', '#' + a.delivery_id));
      tr.appendChild(el('td', a.attempt));
      const o = el('td');
      o.appendChild(badge(a.outcome));
      tr.appendChild(o);
      tr.appendChild(el('td', a.status_code === null ? '—' : a.status_code));
      tr.appendChild(el('td', a.latency_ms));
      tr.appendChild(el('td', a.error || a.response_body || '', 'mono'));
      body.appendChild(tr);
    }
    ep.attemptsBefore = r.data.next_before_id;
    $('ep-attempts-more').hidden = !r.data.next_before_id;
  }

  function close() {
    ep.seq++;
    ep.shown = null;
    hideSecret();
    $('ep-detail').hidden = true;
    $('ep-layout').classList.add('closed');
    for (const tr of $('ep-rows').children) tr.setAttribute('aria-selected', 'false');
  }

  // ---- actions: each on ep.shown only, one request at a time ----

  async function act(button, method, rel, body, done) {
    if (!ep.shown || ep.busy) return;
    const id = ep.shown.id;
    ep.busy = true;
    button.disabled = true;
    const r = await api(method, path(id, rel), body);
    ep.busy = false;
    button.disabled = false;
    if (!ep.shown || ep.shown.id !== id) return; // the operator moved on; the list shows the outcome
    if (!r.ok) {
      result('fail', describe(r));
      return;
    }
    done(r.data);
  }

  function reasonBody() {
    const reason = $('ep-reason').value.trim();
    return reason ? { reason: reason } : undefined;
  }

  function disable() {
    const reason = $('ep-reason').value.trim();
    if (!reason) {
      result('fail', 'Disabling needs a reason.');
      $('ep-reason').focus();
      return;
    }
    act($('ep-disable'), 'POST', 'disable', { reason: reason }, (e) => {
      result('noop', 'Disabled: its deliveries wait until it is enabled.');
      $('ep-reason').value = '';
      render(e);
      ep.shown = e;
      loadList();
    });
  }

  function enable() {
    act($('ep-enable'), 'POST', 'enable', reasonBody(), (e) => {
      result('ok', 'Enabled: its waiting deliveries resume.');
      $('ep-reason').value = '';
      render(e);
      ep.shown = e;
      loadList();
    });
  }

  function askRotate() {
    if (!ep.shown) return;
    $('ep-confirm-text').textContent = 'Rotate the secret of ' + ep.shown.url + '? The new one signs at once; the current one ' +
      'also signs for the overlap (OUTBOUND_ROTATION_OVERLAP), then stops.';
    $('ep-confirm').hidden = false;
    $('ep-confirm-go').focus();
  }

  function rotate() {
    act($('ep-confirm-go'), 'POST', 'rotate-secret', reasonBody(), (s) => {
      $('ep-confirm').hidden = true;
      $('ep-secret-value').textContent = s.secret;
      $('ep-secret').hidden = false;
      result('ok', 'Secret rotated' + (s.previous_secret_expires_at ? '; the previous one signs until ' + utc(s.previous_secret_expires_at) : '') + '.');
      open(ep.shown.id, false);
    });
  }

  function hideSecret() {
    $('ep-secret-value').textContent = '';
    $('ep-secret').hidden = true;
  }

  function recover() {
    const v = $('ep-since').value;
    if (!v) {
      result('fail', 'Recover needs a time to recover since.');
      $('ep-since').focus();
      return;
    }
    // datetime-local has no zone: the field says UTC.
    const since = (v.length === 16 ? v + ':00' : v) + 'Z';
    const body = Object.assign({ since: since }, reasonBody() || {});
    act($('ep-recover'), 'POST', 'recover', body, (r) => {
      result(r.scheduled ? 'ok' : 'noop', 'Recover since ' + utc(since) + ': ' + r.scheduled + ' deliveries scheduled.');
      open(ep.shown.id, false);
      loadList();
    });
  }

  async function resend(id, button) {
    if (ep.busy) return;
    ep.busy = true;
    button.disabled = true;
    const r = await api('POST', '/v1/outbound/deliveries/' + id + '/resend', reasonBody());
    ep.busy = false;
    button.disabled = false;
    if (!r.ok) {
      result('fail', 'Delivery #' + id + ' not re-sent: ' + describe(r));
      return;
    }
    result('ok', 'Delivery #' + id + ' is due now (attempts counted afresh).');
    loadDeliveries(false);
    loadList();
  }

  function init() {
    $('view-endpoints').addEventListener('click', () => activate(true));
    for (const id of ['view-letters', 'view-groups', 'view-payouts']) $(id).addEventListener('click', deactivate);
    $('ep-refresh').addEventListener('click', load);
    $('ep-close').addEventListener('click', close);
    $('ep-state').addEventListener('change', () => loadDeliveries(false));
    $('ep-deliveries-more').addEventListener('click', () => loadDeliveries(true));
    $('ep-attempts-more').addEventListener('click', () => loadAttempts(true));
    $('ep-disable').addEventListener('click', disable);
    $('ep-enable').addEventListener('click', enable);
    $('ep-rotate').addEventListener('click', askRotate);
    $('ep-confirm-go').addEventListener('click', rotate);
    $('ep-confirm-cancel').addEventListener('click', () => { $('ep-confirm').hidden = true; });
    $('ep-secret-hide').addEventListener('click', hideSecret);
    $('ep-recover').addEventListener('click', recover);
    $('token-save').addEventListener('click', () => { ep.me = null; if (ep.active) setTimeout(load, 0); });
    window.addEventListener('popstate', () => {
      if (new URLSearchParams(location.search).get('view') === 'endpoints') activate(false);
      else if (ep.active) deactivate();
    });
    if (new URLSearchParams(location.search).get('view') === 'endpoints') activate(false);
  }

  document.addEventListener('DOMContentLoaded', init);
})();
