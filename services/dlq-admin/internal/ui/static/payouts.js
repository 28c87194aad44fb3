// The page's Payouts view: payouts in NEEDS_REVIEW first, an
// operator's resolution (paid or failed, reason, PSP object id, confirm)
// and the four-eyes approvals. Kept apart from app.js; the same rules:
//  - it acts only on the payout shown: po.shown is set once the payout's
//    fetch succeeded and rendered; switching clears the dialog and result;
//  - a request that changes something disables its buttons until the
//    answer is in (a double click is one POST);
//  - viewers see no write control; the DOM is built with textContent only.
'use strict';

(function () {
  const TOKEN_KEY = 'aegis.dlq-admin.token';
  const po = {
    active: false, me: null, items: [], shown: null, seq: 0, busy: false, poll: 0,
  };
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function badge(text) { return el('span', text || '—', 'badge ' + (text || 'other')); }
  function money(amount, currency) {
    const cur = (currency || '').toLowerCase();
    const zero = ['jpy', 'krw', 'vnd', 'xaf', 'xof', 'clp', 'ugx', 'rwf'].includes(cur);
    return (zero ? String(amount) : (amount / 100).toFixed(2)) + ' ' + cur.toUpperCase();
  }
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
  function canWrite() { return po.me && po.me.role === 'operator'; }
  function applyRole() {
    for (const e of document.querySelectorAll('.write-po')) e.hidden = !canWrite();
  }
  function result(id, kind, text) {
    const r = $(id);
    r.className = 'result ' + kind;
    r.textContent = text;
    r.hidden = !text;
  }

  // ---- view switching: the letters' views stay app.js's ----

  function activate(push) {
    po.active = true;
    document.body.classList.add('payouts-mode');
    $('payouts-view').hidden = false;
    for (const id of ['view-letters', 'view-groups', 'view-endpoints']) $(id).setAttribute('aria-pressed', 'false');
    $('view-payouts').setAttribute('aria-pressed', 'true');
    if (push) {
      const q = new URLSearchParams(location.search);
      q.set('view', 'payouts');
      q.delete('letter');
      history.pushState({}, '', location.pathname + '?' + q.toString());
    }
    load();
  }
  function deactivate() {
    po.active = false;
    document.body.classList.remove('payouts-mode');
    $('payouts-view').hidden = true;
    $('view-payouts').setAttribute('aria-pressed', 'false');
    clearInterval(po.poll);
  }

  async function load() {
    if (!sessionStorage.getItem(TOKEN_KEY)) {
      $('po-list-status').textContent = 'Enter a token to load payouts.';
      return;
    }
    const me = await api('GET', '/v1/me');
    if (me.ok) po.me = me.data;
    applyRole();
    await Promise.all([loadList(), loadApprovals()]);
  }

  // ---- list ----

  async function loadList() {
    const q = new URLSearchParams({ limit: '100' });
    const st = $('po-status').value;
    if (st) q.set('status', st);
    $('po-list-status').textContent = 'Loading…';
    const r = await api('GET', '/v1/payouts?' + q.toString());
    if (!r.ok) {
      $('po-list-status').textContent = 'Could not load payouts: ' + describe(r);
      return;
    }
    po.items = r.data.items;
    const body = $('po-rows');
    body.replaceChildren();
    for (const p of po.items) {
      const tr = el('tr');
      tr.dataset.id = p.id;
      tr.tabIndex = 0;
      tr.setAttribute('aria-selected', po.shown && po.shown.id === p.id ? 'true' : 'false');
      tr.appendChild(el('td', p.id, 'mono'));
      const st = el('td');
      st.appendChild(badge(p.status));
      tr.appendChild(st);
      tr.appendChild(el('td', p.user_id));
      tr.appendChild(el('td', money(p.amount, p.currency) + ' · ' + p.provider));
      tr.appendChild(el('td', p.psp_reference || '—', 'mono'));
      const why = el('td', p.last_error || '—');
      if (p.dead_letter_id) {
        why.appendChild(document.createTextNode(' '));
        const a = el('a', 'letter #' + p.dead_letter_id);
        a.href = '/?status=any&letter=' + p.dead_letter_id;
        a.addEventListener('click', (e) => e.stopPropagation());
        why.appendChild(a);
      }
      tr.appendChild(why);
      const rs = el('td');
      if (p.resolution_status) rs.appendChild(badge(p.resolution_status));
      else rs.textContent = '—';
      tr.appendChild(rs);
      tr.addEventListener('click', () => openPayout(p.id));
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') openPayout(p.id); });
      body.appendChild(tr);
    }
    $('po-list-status').textContent = po.items.length ? po.items.length + ' payouts' : 'No payout in this state.';
  }

  // ---- one payout: act only on what is shown ----

  function clearAction() {
    $('po-confirm').hidden = true;
    result('po-result', '', '');
    $('po-reason').value = '';
    $('po-evidence').value = '';
    for (const r of document.querySelectorAll('input[name="po-outcome"]')) r.checked = false;
    clearInterval(po.poll);
    updateResolveButton();
  }

  function updateResolveButton() {
    const ready = po.shown && po.shown.status === 'NEEDS_REVIEW' && !po.busy && outcome() &&
      $('po-reason').value.trim() && $('po-evidence').value.trim();
    $('po-resolve-btn').disabled = !ready;
  }
  function outcome() {
    const r = document.querySelector('input[name="po-outcome"]:checked');
    return r ? r.value : '';
  }

  async function openPayout(id) {
    const seq = ++po.seq;
    po.shown = null; // nothing is acted on until this payout is on screen
    clearAction();
    $('po-detail').hidden = false;
    $('po-layout').classList.remove('closed');
    $('po-body').hidden = true;
    $('po-failed').hidden = true;
    $('po-loading').textContent = 'Loading payout ' + id + '…';
    $('po-loading').hidden = false;
    $('po-title').textContent = 'Payout';
    $('po-badge').replaceChildren();
    const [p, rs] = await Promise.all([api('GET', '/v1/payouts/' + id), api('GET', '/v1/payouts/' + id + '/resolutions')]);
    if (seq !== po.seq) return; // another payout was opened meanwhile
    $('po-loading').hidden = true;
    if (!p.ok || !rs.ok) {
      $('po-failed').textContent = 'Could not load payout ' + id + ': ' + describe(p.ok ? rs : p);
      $('po-failed').hidden = false;
      return;
    }
    renderPayout(p.data, rs.data.items);
    po.shown = p.data;
    updateResolveButton();
    for (const tr of $('po-rows').children) tr.setAttribute('aria-selected', tr.dataset.id === id ? 'true' : 'false');
    $('po-title').focus();
  }

  function renderPayout(p, resolutions) {
    $('po-title').textContent = 'Payout ' + p.id;
    $('po-badge').replaceChildren(badge(p.status));
    const dl = $('po-fields');
    dl.replaceChildren();
    const field = (k, v) => { dl.appendChild(el('dt', k)); dl.appendChild(el('dd', v === null || v === undefined || v === '' ? '—' : v)); };
    field('Amount', money(p.amount, p.currency));
    field('User', p.user_id);
    field('Provider', p.provider);
    field('Destination', p.destination);
    field('PSP object', p.psp_reference);
    field('PSP status', p.psp_status);
    field('Why', p.last_error);
    field('Error class', p.error_class);
    field('Updated', utc(p.updated_at));
    $('po-resolve').hidden = !(canWrite() && p.status === 'NEEDS_REVIEW');
    $('po-evidence').placeholder = p.psp_reference ? 'e.g. ' + p.psp_reference : 'po_…';
    renderResolutions(resolutions);
    $('po-body').hidden = false;
  }

  function renderResolutions(list) {
    const body = $('po-resolutions');
    body.replaceChildren();
    if (!list.length) {
      const tr = el('tr');
      const td = el('td', 'None yet.', 'muted');
      td.colSpan = 5;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    for (const r of list) {
      const tr = el('tr');
      tr.appendChild(el('td', utc(r.created_at)));
      tr.appendChild(el('td', r.outcome + ' · ' + r.psp_object_id));
      tr.appendChild(el('td', r.requested_by + (r.approved_by ? ' + ' + r.approved_by : '')));
      const st = el('td');
      st.appendChild(badge(r.status));
      tr.appendChild(st);
      tr.appendChild(el('td', r.psp_answer || '—'));
      body.appendChild(tr);
    }
  }

  function askResolve() {
    const p = po.shown;
    if (!p || po.busy) return;
    const out = outcome();
    const effect = out === 'paid' ? 'the hold of ' + money(p.amount, p.currency) + ' is settled (paid out)'
      : 'the hold of ' + money(p.amount, p.currency) + ' goes back to ' + p.user_id + '’s wallet';
    $('po-confirm-text').textContent = 'Resolve payout ' + p.id + ' as ' + out.toUpperCase() + ' with evidence ' +
      $('po-evidence').value.trim() + ': ' + effect + ', once payout-worker has checked it against the PSP.';
    $('po-confirm').hidden = false;
    $('po-confirm-go').focus();
  }

  async function resolve() {
    const p = po.shown;
    if (!p || po.busy) return;
    po.busy = true;
    $('po-confirm-go').disabled = true;
    updateResolveButton();
    const id = p.id;
    const r = await api('POST', '/v1/payouts/' + id + '/resolve',
      { outcome: outcome(), reason: $('po-reason').value.trim(), psp_object_id: $('po-evidence').value.trim() });
    po.busy = false;
    $('po-confirm-go').disabled = false;
    $('po-confirm').hidden = true;
    if (!po.shown || po.shown.id !== id) return; // the person moved on; the list will show it
    if (!r.ok) {
      result('po-result', 'fail', 'Not resolved: ' + describe(r));
      updateResolveButton();
      return;
    }
    showResolution(r.data);
    // Sent: the form is cleared, so that another resolution is a new,
    // deliberate one (a refused one may be followed by a better one).
    $('po-reason').value = '';
    $('po-evidence').value = '';
    for (const o of document.querySelectorAll('input[name="po-outcome"]')) o.checked = false;
    updateResolveButton();
    if (r.data.status === 'pending') follow(id, r.data.id);
    loadList();
    loadApprovals();
  }

  function showResolution(res) {
    const text = {
      pending: 'Sent to payout-worker: it checks the evidence against the PSP (resolution ' + res.id + ').',
      awaiting_approval: 'Waiting for a second operator to approve it (approval #' + res.approval_id + ').',
      applied: 'Applied: ' + (res.psp_answer || ''),
      refused: 'Refused by payout-worker: ' + (res.psp_answer || ''),
      rejected: 'Rejected by a second operator.',
    }[res.status] || res.status;
    const kind = { applied: 'ok', refused: 'fail', rejected: 'fail' }[res.status] || 'noop';
    result('po-result', kind, text);
  }

  // follow polls a pending resolution until the worker decided it.
  function follow(payoutID, rid) {
    clearInterval(po.poll);
    let left = 60;
    po.poll = setInterval(async () => {
      if (--left < 0 || !po.shown || po.shown.id !== payoutID) { clearInterval(po.poll); return; }
      const r = await api('GET', '/v1/resolutions/' + rid);
      if (!r.ok || r.data.status === 'pending') return;
      clearInterval(po.poll);
      if (!po.shown || po.shown.id !== payoutID) return;
      showResolution(r.data);
      const [p, rs] = await Promise.all([api('GET', '/v1/payouts/' + payoutID), api('GET', '/v1/payouts/' + payoutID + '/resolutions')]);
      if (p.ok && rs.ok && po.shown && po.shown.id === payoutID) {
        po.shown = p.data;
        const kept = $('po-result').textContent, cls = $('po-result').className;
        renderPayout(p.data, rs.data.items);
        $('po-result').textContent = kept;
        $('po-result').className = cls;
        $('po-result').hidden = false;
      }
      loadList();
    }, 1000);
  }

  function closePayout() {
    po.seq++;
    po.shown = null;
    clearAction();
    $('po-detail').hidden = true;
    $('po-layout').classList.add('closed');
    for (const tr of $('po-rows').children) tr.setAttribute('aria-selected', 'false');
  }

  // ---- approvals ----

  async function loadApprovals() {
    const r = await api('GET', '/v1/approvals?status=pending');
    const body = $('ap-rows');
    body.replaceChildren();
    if (!r.ok) {
      result('ap-result', 'fail', 'Could not load approvals: ' + describe(r));
      return;
    }
    if (!r.data.items.length) {
      const tr = el('tr');
      const td = el('td', 'Nothing waits for a second operator.', 'muted');
      td.colSpan = 6;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    for (const a of r.data.items) {
      const tr = el('tr');
      tr.dataset.id = String(a.id);
      tr.appendChild(el('td', '#' + a.id));
      tr.appendChild(el('td', a.kind));
      tr.appendChild(el('td', a.summary));
      tr.appendChild(el('td', a.requested_by));
      tr.appendChild(el('td', utc(a.created_at)));
      const td = el('td');
      if (canWrite()) {
        const mine = po.me && po.me.name === a.requested_by;
        const ok = el('button', 'Approve', 'btn primary');
        ok.type = 'button';
        ok.disabled = mine;
        ok.title = mine ? 'Your own request: a different operator must approve it' : '';
        ok.setAttribute('aria-label', 'Approve #' + a.id);
        ok.addEventListener('click', () => decide(a.id, 'approve', tr));
        const no = el('button', 'Reject', 'btn ghost');
        no.type = 'button';
        no.setAttribute('aria-label', 'Reject #' + a.id);
        no.addEventListener('click', () => decide(a.id, 'reject', tr));
        td.append(ok, ' ', no);
        if (mine) td.appendChild(el('small', ' your request', 'muted'));
      }
      tr.appendChild(td);
      body.appendChild(tr);
    }
  }

  async function decide(id, verb, tr) {
    const reason = $('ap-reason').value.trim();
    if (verb === 'reject' && !reason) {
      result('ap-result', 'fail', 'Rejecting #' + id + ' needs a reason.');
      $('ap-reason').focus();
      return;
    }
    const buttons = tr.querySelectorAll('button');
    for (const b of buttons) b.disabled = true;
    const r = await api('POST', '/v1/approvals/' + id + '/' + verb, reason ? { reason: reason } : undefined);
    if (!r.ok) {
      result('ap-result', 'fail', 'Approval #' + id + ' not ' + (verb === 'approve' ? 'approved' : 'rejected') + ': ' + describe(r));
      for (const b of buttons) b.disabled = false;
      return;
    }
    result('ap-result', verb === 'approve' ? 'ok' : 'noop', 'Approval #' + id + ' ' + r.data.status + ' by ' + r.data.decided_by +
      (r.data.result_id ? ' (' + (r.data.kind === 'bulk_replay' ? 'replay job ' : 'resolution ') + r.data.result_id + ')' : '') + '.');
    $('ap-reason').value = '';
    loadApprovals();
    loadList();
  }

  function init() {
    $('view-payouts').addEventListener('click', () => activate(true));
    for (const id of ['view-letters', 'view-groups', 'view-endpoints']) $(id).addEventListener('click', deactivate);
    $('po-refresh').addEventListener('click', load);
    $('po-status').addEventListener('change', loadList);
    $('po-close').addEventListener('click', closePayout);
    $('po-resolve-btn').addEventListener('click', askResolve);
    $('po-confirm-go').addEventListener('click', resolve);
    $('po-confirm-cancel').addEventListener('click', () => { $('po-confirm').hidden = true; updateResolveButton(); });
    for (const id of ['po-reason', 'po-evidence']) $(id).addEventListener('input', () => { $('po-confirm').hidden = true; updateResolveButton(); });
    for (const r of document.querySelectorAll('input[name="po-outcome"]')) {
      r.addEventListener('change', () => { $('po-confirm').hidden = true; updateResolveButton(); });
    }
    $('token-save').addEventListener('click', () => { po.me = null; if (po.active) setTimeout(load, 0); });
    window.addEventListener('popstate', () => {
      if (new URLSearchParams(location.search).get('view') === 'payouts') activate(false);
      else if (po.active) deactivate();
    });
    $('po-layout').classList.add('closed');
    if (new URLSearchParams(location.search).get('view') === 'payouts') activate(false);
  }

  document.addEventListener('DOMContentLoaded', init);
})();
