// dlq-admin's page. Everything comes from the /v1 API with the operator's
// token; the DOM is built with textContent only, so nothing a dead letter
// carries is ever interpreted as HTML.
//
// Rules the page keeps:
//  - it acts only on the letter shown: state.shown is set when a letter's
//    fetch succeeded and rendered, never before; a failed or superseded
//    fetch leaves no letter selected and every action disabled;
//  - every request that changes something disables its buttons until the
//    answer is in, so a double click is one POST;
//  - filters, the view and the open letter live in the URL (pushState), so
//    a letter can be pasted into the incident channel and back/forward work.
'use strict';

(function () {
  const TOKEN_KEY = 'aegis.dlq-admin.token';
  const TZ_KEY = 'aegis.dlq-admin.tz';
  const THEME_KEY = 'aegis.dlq-admin.theme';
  const MAX_BULK = 10000;
  const FILTERS = [
    ['payout_id', 'f-payout'], ['user', 'f-user'], ['correlation_id', 'f-corr'], ['event_type', 'f-event'],
    ['topic', 'f-topic'], ['error_class', 'f-class'],
  ];

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    role: '',
    tz: localStorage.getItem(TZ_KEY) === 'local' ? 'local' : 'utc',
    theme: localStorage.getItem(THEME_KEY) || 'auto',
    view: 'letters',
    filter: {}, // the applied filters, as API query values (status: '' is any)
    cursors: [''],
    page: 0,
    next: '',
    items: [], // the letters on this page, by row order
    shown: null, // the letter rendered in the panel: the only one actions act on
    loadSeq: 0,
    listSeq: 0,
    listKey: '',
    busy: false,
    confirm: null, // what #confirm-go does
    picked: new Set(),
    allMatching: false,
    bulk: null, // the bulk action being confirmed
    job: null,
    jobTimer: 0,
    refreshSeconds: 15,
    refreshTimer: 0,
    asOf: null,
    lastError: '',
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function badge(text, kind) {
    const known = ['open', 'replayed', 'discarded', 'permanent', 'transient', 'poison', 'unknown',
      'queued', 'running', 'done', 'failed', 'cancelled'];
    return el('span', text, 'badge ' + (known.includes(kind) ? kind : 'other'));
  }

  // ---- time: one zone throughout, UTC unless the person chose local ----

  function pad(n) { return String(n).padStart(2, '0'); }

  function fmtTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (isNaN(d.getTime())) return iso;
    if (state.tz === 'utc') {
      return d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' +
        pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds()) + ' UTC';
    }
    const off = -d.getTimezoneOffset();
    const sign = off >= 0 ? '+' : '-';
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' +
      sign + pad(Math.floor(Math.abs(off) / 60)) + ':' + pad(Math.abs(off) % 60);
  }

  function tzName() { return state.tz === 'utc' ? '(UTC)' : '(local, ' + Intl.DateTimeFormat().resolvedOptions().timeZone + ')'; }

  function span(seconds) {
    if (seconds === null || seconds === undefined) return '—';
    seconds = Math.max(0, Math.floor(seconds));
    const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600), m = Math.floor(seconds % 3600 / 60);
    if (d > 0) return d + 'd ' + h + 'h';
    if (h > 0) return h + 'h ' + m + 'm';
    if (m > 0) return m + 'm';
    return seconds + 's';
  }

  function ago(iso) {
    const t = new Date(iso).getTime();
    if (isNaN(t)) return '—';
    return span((Date.now() - t) / 1000) + ' ago';
  }

  // An input's datetime-local value, read in the chosen zone, as RFC 3339.
  function inputToISO(v) {
    if (!v) return '';
    if (v.length === 16) v += ':00';
    const d = state.tz === 'utc' ? new Date(v + 'Z') : new Date(v);
    return isNaN(d.getTime()) ? '' : d.toISOString().replace('.000Z', 'Z');
  }

  function isoToInput(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (isNaN(d.getTime())) return '';
    if (state.tz === 'utc') return d.toISOString().slice(0, 19);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  // ---- money ----

  const ZERO_DECIMAL = ['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf'];

  function money(amount, currency) {
    if (amount === null || amount === undefined) return '';
    const cur = (currency || '').toLowerCase();
    const v = ZERO_DECIMAL.includes(cur) ? String(amount) : (amount / 100).toFixed(2);
    return v + (cur ? ' ' + cur.toUpperCase() : '');
  }

  // ---- API ----

  async function api(method, path, body) {
    const opts = { method: method, headers: { Authorization: 'Bearer ' + state.token } };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, opts);
    } catch (e) {
      return { status: 0, ok: false, data: { error: { code: 'network', message: 'dlq-admin did not answer: ' + e.message } } };
    }
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return { status: res.status, ok: res.ok, data: data };
  }

  function describeError(r) {
    const e = r.data && r.data.error;
    if (e) return r.status + ' ' + e.code + ': ' + e.message;
    return 'HTTP ' + r.status;
  }

  function notice(text) {
    const n = $('notice');
    n.textContent = text || '';
    n.hidden = !text;
  }

  function canWrite() { return state.role === 'operator'; }

  // ---- URL state ----

  function readURL() {
    const q = new URLSearchParams(location.search);
    const f = {};
    for (const [k] of FILTERS) if (q.get(k)) f[k] = q.get(k);
    const st = q.get('status');
    f.status = st === null ? 'open' : (st === 'any' ? '' : st);
    if (q.get('since')) f.since = q.get('since');
    if (q.get('until')) f.until = q.get('until');
    if (q.get('limit')) f.limit = q.get('limit');
    const letter = Number(q.get('letter')) || 0;
    const refresh = Number(q.get('refresh'));
    if (refresh >= 1) state.refreshSeconds = refresh;
    return { filter: f, view: q.get('view') === 'groups' ? 'groups' : 'letters', letter: letter };
  }

  function urlFor(letter) {
    const q = new URLSearchParams();
    const f = state.filter;
    for (const [k] of FILTERS) if (f[k]) q.set(k, f[k]);
    if (f.status !== 'open') q.set('status', f.status || 'any');
    if (f.since) q.set('since', f.since);
    if (f.until) q.set('until', f.until);
    if (f.limit && f.limit !== '50') q.set('limit', f.limit);
    if (state.view === 'groups') q.set('view', 'groups');
    if (letter) q.set('letter', String(letter));
    const refresh = new URLSearchParams(location.search).get('refresh');
    if (refresh) q.set('refresh', refresh);
    const s = q.toString();
    return location.pathname + (s ? '?' + s : '');
  }

  function pushURL(letter) {
    const url = urlFor(letter);
    if (url !== location.pathname + location.search) history.pushState({ letter: letter || 0 }, '', url);
  }

  function filterToInputs() {
    const f = state.filter;
    for (const [k, id] of FILTERS) {
      const input = $(id);
      if (input.tagName === 'SELECT' && f[k] && !Array.from(input.options).some((o) => o.value === f[k])) {
        input.appendChild(el('option', f[k]));
      }
      input.value = f[k] || '';
    }
    $('f-status').value = f.status === '' ? 'any' : (f.status || 'open');
    $('f-since').value = isoToInput(f.since);
    $('f-until').value = isoToInput(f.until);
    $('f-limit').value = f.limit || '50';
  }

  function inputsToFilter() {
    const f = {};
    for (const [k, id] of FILTERS) {
      const v = $(id).value.trim();
      if (v) f[k] = v;
    }
    const st = $('f-status').value;
    f.status = st === 'any' ? '' : st;
    const since = inputToISO($('f-since').value), until = inputToISO($('f-until').value);
    if (since) f.since = since;
    if (until) f.until = until;
    if ($('f-limit').value !== '50') f.limit = $('f-limit').value;
    return f;
  }

  // The API query of the applied filters.
  function filterQuery(withPage) {
    const q = new URLSearchParams();
    const f = state.filter;
    for (const [k] of FILTERS) if (f[k]) q.set(k, f[k]);
    q.set('status', f.status || '');
    if (f.since) q.set('since', f.since);
    if (f.until) q.set('until', f.until);
    if (withPage) {
      q.set('limit', f.limit || '50');
      if (state.cursors[state.page]) q.set('cursor', state.cursors[state.page]);
    }
    return q.toString();
  }

  // The applied filters as a bulk request body (only open letters are acted on).
  function filterBody() {
    const b = {};
    const f = state.filter;
    for (const [k] of FILTERS) if (f[k]) b[k] = f[k];
    if (f.since) b.since = f.since;
    if (f.until) b.until = f.until;
    b.status = 'open';
    return b;
  }

  // ---- who am I ----

  async function loadMe() {
    if (!state.token) return false;
    const r = await api('GET', '/v1/me');
    if (!r.ok) {
      state.role = '';
      applyRole();
      if (r.status === 401) notice('The token was refused (401). Check it and press “Use token”.');
      else notice('Could not learn who this token is: ' + describeError(r));
      return false;
    }
    state.role = r.data.role;
    $('me').textContent = r.data.name + ' · ' + r.data.role;
    $('me').hidden = false;
    applyRole();
    return true;
  }

  // Viewers never see a write control: they would only meet a 403.
  function applyRole() {
    const write = canWrite();
    document.body.classList.toggle('can-write', write);
    for (const e of document.querySelectorAll('.write')) e.hidden = !write;
  }

  // ---- list ----

  async function refresh() {
    if (!state.token) return;
    const results = await Promise.all([state.view === 'groups' ? loadGroups() : loadList(), loadStats()]);
    const failed = results.find((r) => r && !r.ok);
    if (failed) {
      state.lastError = describeError(failed);
    } else {
      state.lastError = '';
      state.asOf = new Date();
    }
    renderFreshness();
  }

  function renderFreshness() {
    const b = $('banner');
    if (!state.asOf) {
      $('as-of').textContent = 'not loaded';
    } else {
      $('as-of').textContent = 'as of ' + fmtTime(state.asOf.toISOString()) + ' · every ' + state.refreshSeconds + 's';
      $('as-of').title = 'Refreshed automatically every ' + state.refreshSeconds + ' seconds';
    }
    const staleAfter = 3 * state.refreshSeconds * 1000;
    const stale = state.asOf && Date.now() - state.asOf.getTime() > staleAfter;
    let text = '';
    if (state.lastError) {
      text = 'Refresh failed: ' + state.lastError + '. ' +
        (state.asOf ? 'What you see is as of ' + fmtTime(state.asOf.toISOString()) + '.' : 'Nothing loaded yet.');
    } else if (stale) {
      text = 'Stale: the last successful refresh was ' + ago(state.asOf.toISOString()) + '.';
    }
    b.textContent = text;
    b.hidden = !text;
    document.body.classList.toggle('stale', !!text);
  }

  function scheduleRefresh() {
    clearInterval(state.refreshTimer);
    state.refreshTimer = setInterval(() => {
      if (document.hidden) return;
      refresh();
    }, state.refreshSeconds * 1000);
  }

  async function loadStats() {
    const r = await api('GET', '/v1/dead-letters/stats');
    if (!r.ok) return r;
    const s = r.data;
    $('stat-open').textContent = s.by_status.open;
    $('stat-replayed').textContent = s.by_status.replayed;
    $('stat-discarded').textContent = s.by_status.discarded;
    $('stat-oldest').textContent = span(s.oldest_open_age_seconds);
    const sel = $('f-topic');
    const have = new Set(Array.from(sel.options).map((o) => o.value));
    for (const t of s.topics) {
      if (!have.has(t.topic)) sel.appendChild(el('option', t.topic));
    }
    sel.value = state.filter.topic || '';
    return r;
  }

  function subjectText(s) {
    const parts = [];
    if (s.user_id) parts.push(s.user_id);
    const m = money(s.amount, s.currency);
    if (m) parts.push(m);
    return parts.join(' · ');
  }

  function subjectID(s) {
    if (s.payout_id) return 'payout ' + s.payout_id;
    if (s.event_id) return (s.provider ? s.provider + ' ' : '') + 'event ' + s.event_id;
    return '';
  }

  async function loadList() {
    const focusedID = document.activeElement && document.activeElement.closest && document.activeElement.closest('#letters tr')
      ? Number(document.activeElement.closest('#letters tr').dataset.id) : 0;
    if ($('letters').children.length === 0) $('list-status').textContent = 'Loading…';
    const seq = ++state.listSeq;
    const r = await api('GET', '/v1/dead-letters?' + filterQuery(true));
    // An answer to an earlier filter (a refresh in flight when Apply was
    // pressed) must not overwrite the list of the current one.
    if (seq !== state.listSeq) return { ok: true, stale: true };
    if (!r.ok) {
      $('list-status').textContent = describeError(r);
      if (r.status === 401) notice('The token was refused (401). Check it and press “Use token”.');
      updatePager();
      return r;
    }
    notice('');
    const body = $('letters');
    state.next = r.data.next_cursor || '';
    // Unchanged since the last refresh: keep the rows (focus, hover, the
    // row under the pointer) and only age them.
    const key = JSON.stringify(r.data.items) + '|' + state.role + '|' + state.tz;
    if (key === state.listKey && body.children.length === r.data.items.length) {
      for (const tr of body.children) {
        const it = r.data.items.find((x) => String(x.id) === tr.dataset.id);
        const age = tr.querySelector('td.age');
        if (it && age) age.textContent = ago(it.failed_at);
      }
      markSelectedRow();
      updatePager();
      return r;
    }
    state.listKey = key;
    body.replaceChildren();
    state.items = r.data.items;
    const write = canWrite();
    for (const it of r.data.items) {
      const s = it.subject || {};
      const tr = el('tr');
      tr.dataset.id = it.id;
      tr.tabIndex = 0;
      tr.setAttribute('aria-label', 'Dead letter #' + it.id + ', ' + it.status + ', ' + (subjectID(s) || it.original_topic) + ', ' + it.error);
      if (state.shown && state.shown.id === it.id) tr.classList.add('selected');
      const pick = el('td', null, 'c-pick write');
      pick.hidden = !write;
      const box = el('input');
      box.type = 'checkbox';
      box.className = 'pick';
      box.checked = state.allMatching || state.picked.has(it.id);
      box.disabled = state.allMatching || it.status !== 'open';
      box.setAttribute('aria-label', 'Select dead letter #' + it.id);
      box.addEventListener('click', (e) => e.stopPropagation());
      box.addEventListener('change', () => {
        if (box.checked) state.picked.add(it.id); else state.picked.delete(it.id);
        renderBulk();
      });
      pick.appendChild(box);
      tr.appendChild(pick);
      tr.appendChild(el('td', it.id, 'num'));
      const when = el('td', ago(it.failed_at), 'age');
      when.title = fmtTime(it.failed_at);
      tr.appendChild(when);
      const subj = el('td', null, 'subject-cell');
      subj.appendChild(el('div', subjectID(s) || '—', 'mono ellipsis'));
      const who = subjectText(s);
      if (who) subj.appendChild(el('div', who, 'muted small'));
      tr.appendChild(subj);
      const type = el('td');
      type.appendChild(el('div', s.event_type || it.event_type || '—', 'ellipsis'));
      type.appendChild(el('div', it.original_topic, 'muted small ellipsis'));
      tr.appendChild(type);
      const err = el('td', null, 'err');
      err.appendChild(badge(it.error_class, it.error_class));
      err.appendChild(el('span', ' ' + it.error, 'err-text'));
      err.title = it.error;
      tr.appendChild(err);
      const st = el('td');
      st.appendChild(badge(it.status, it.status));
      tr.appendChild(st);
      tr.addEventListener('click', () => openLetter(it.id, true));
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && e.target === tr) { e.preventDefault(); openLetter(it.id, true); }
      });
      body.appendChild(tr);
    }
    if (focusedID) {
      const again = body.querySelector('tr[data-id="' + focusedID + '"]');
      if (again) again.focus();
    }
    const n = r.data.items.length;
    $('list-status').textContent = n === 0 ? 'No dead letters match.' : n + ' dead letter' + (n === 1 ? '' : 's') + ' on this page.';
    updatePager();
    $('pick-page').checked = n > 0 && r.data.items.every((it) => it.status !== 'open' || state.picked.has(it.id));
    return r;
  }

  async function loadGroups() {
    const q = new URLSearchParams(filterQuery(false));
    const seq = ++state.listSeq;
    const r = await api('GET', '/v1/dead-letters/groups?' + q.toString());
    if (seq !== state.listSeq) return { ok: true, stale: true };
    const body = $('groups');
    if (!r.ok) {
      $('list-status').textContent = describeError(r);
      return r;
    }
    body.replaceChildren();
    for (const g of r.data.items) {
      const tr = el('tr');
      tr.appendChild(el('td', g.count + ' ×', 'num count'));
      const e = el('td', null, 'err');
      e.appendChild(badge(g.error_class, g.error_class));
      e.appendChild(el('span', ' ' + g.message, 'err-text'));
      e.title = g.sample_error;
      tr.appendChild(e);
      tr.appendChild(el('td', g.topics.join(', '), 'small'));
      const newest = el('td', ago(g.newest_failed_at), 'age');
      newest.title = fmtTime(g.newest_failed_at);
      tr.appendChild(newest);
      const act = el('td');
      const b = el('button', 'Show', 'btn ghost small-btn');
      b.type = 'button';
      b.setAttribute('aria-label', 'Show the ' + g.count + ' ' + g.error_class + ' letters, starting with #' + g.sample_id);
      b.addEventListener('click', () => {
        state.filter = Object.assign({}, state.filter, { error_class: g.error_class });
        filterToInputs();
        setView('letters', false);
        restart();
        openLetter(g.sample_id, true);
      });
      act.appendChild(b);
      tr.appendChild(act);
      body.appendChild(tr);
    }
    const n = r.data.items.length;
    $('list-status').textContent = n === 0 ? 'No groups: no letters match.' : n + ' group' + (n === 1 ? '' : 's') + ' of errors.';
    return r;
  }

  function setView(view, push) {
    state.view = view;
    $('view-letters').setAttribute('aria-pressed', String(view === 'letters'));
    $('view-groups').setAttribute('aria-pressed', String(view === 'groups'));
    $('letters-table').hidden = view !== 'letters';
    $('groups-table').hidden = view !== 'groups';
    $('page-first').parentElement.hidden = view !== 'letters';
    if (push) pushURL(state.shown ? state.shown.id : 0);
  }

  function updatePager() {
    $('page-first').disabled = state.page === 0;
    $('page-next').disabled = !state.next;
    $('page-label').textContent = 'Page ' + (state.page + 1);
  }

  // ---- one letter ----

  function field(dl, name, value) {
    dl.appendChild(el('dt', name));
    const dd = el('dd');
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = value === null || value === undefined || value === '' ? '—' : value;
    dl.appendChild(dd);
    return dd;
  }

  // Clears what belongs to the letter that was shown: the result of the
  // last action, the typed reason and any pending confirmation.
  function clearActionState() {
    const p = $('action-result');
    p.hidden = true;
    p.textContent = '';
    p.className = 'result';
    $('reason').value = '';
    hideConfirm();
  }

  function setActionsEnabled(on) {
    const open = on && state.shown && state.shown.status === 'open' && !state.busy;
    $('replay-btn').disabled = !open;
    $('discard-btn').disabled = !open;
    $('reason').disabled = !open;
    $('confirm-go').disabled = !open;
  }

  function markSelectedRow() {
    for (const tr of $('letters').children) {
      const sel = !!state.shown && Number(tr.dataset.id) === state.shown.id;
      tr.classList.toggle('selected', sel);
      if (sel) tr.setAttribute('aria-current', 'true'); else tr.removeAttribute('aria-current');
    }
  }

  // openLetter shows letter id. Until its fetch succeeds the panel keeps no
  // selection: actions are disabled, so nothing can act on a letter other
  // than the one on screen; an answer that arrives after a later click is
  // dropped.
  async function openLetter(id, push) {
    const seq = ++state.loadSeq;
    state.shown = null;
    clearActionState();
    setActionsEnabled(false);
    markSelectedRow();
    $('detail').hidden = false;
    document.body.classList.add('detail-open');
    $('detail-failed').hidden = true;
    $('detail-loading').hidden = false;
    $('detail-loading').textContent = 'Loading dead letter #' + id + '…';
    $('detail').setAttribute('aria-busy', 'true');
    const r = await api('GET', '/v1/dead-letters/' + id);
    if (seq !== state.loadSeq) return; // a later click won
    $('detail').removeAttribute('aria-busy');
    $('detail-loading').hidden = true;
    if (!r.ok) {
      $('detail-title').textContent = 'Dead letter #' + id + ' could not be loaded';
      $('detail-status').textContent = '';
      $('detail-status').className = 'badge';
      $('detail-body').hidden = true;
      const f = $('detail-failed');
      f.textContent = describeError(r) + '. Nothing is selected; pick the letter again to retry.';
      f.hidden = false;
      markSelectedRow();
      return;
    }
    $('detail-body').hidden = false;
    state.shown = r.data;
    renderDetail(r.data);
    markSelectedRow();
    if (push) pushURL(id);
    if (window.matchMedia('(max-width: 1100px)').matches) $('detail-title').focus({ preventScroll: true });
  }

  function closeLetter(push) {
    state.loadSeq++;
    state.shown = null;
    clearActionState();
    $('detail').hidden = true;
    document.body.classList.remove('detail-open');
    markSelectedRow();
    if (push) pushURL(0);
  }

  function link(text, onClick, href) {
    const a = el('a', text);
    a.href = href || '#';
    a.addEventListener('click', (e) => { e.preventDefault(); onClick(); });
    return a;
  }

  function letterLink(n) {
    return link('#' + n, () => openLetter(n, true), urlFor(n));
  }

  function renderDetail(d) {
    $('detail-title').textContent = 'Dead letter #' + d.id;
    const st = $('detail-status');
    st.textContent = d.status;
    st.className = 'badge ' + d.status;
    const s = d.subject || {};

    // The subject first: what failed, for whom, how much.
    const subj = $('subject');
    subj.replaceChildren();
    if (s.payout_id) {
      const p = el('p', null, 'subject-line');
      p.appendChild(el('span', 'Payout ', 'muted'));
      p.appendChild(link(s.payout_id, () => { $('payout').scrollIntoView({ block: 'start' }); }, '#payout'));
      p.lastChild.id = 'payout-link';
      subj.appendChild(p);
    } else if (s.event_id) {
      const p = el('p', null, 'subject-line');
      p.appendChild(el('span', 'Webhook event ', 'muted'));
      p.appendChild(el('span', (s.provider ? s.provider + ' ' : '') + s.event_id, 'mono'));
      p.id = 'event-link';
      subj.appendChild(p);
    }
    const facts = [];
    if (s.user_id) facts.push('user ' + s.user_id);
    if (s.amount !== null && s.amount !== undefined) facts.push(money(s.amount, s.currency));
    if (s.event_type) facts.push(s.event_type);
    if (facts.length) subj.appendChild(el('p', facts.join(' · '), 'subject-facts'));

    const would = $('replay-would');
    if (d.status === 'open' && d.replay_would && d.replay_would.outcome === 'noop') {
      would.textContent = 'A replay would change nothing: the ' + (s.payout_id ? 'payout' : 'event') + ' is already ' +
        (d.replay_would.subject_state || 'final') + '. Discard it instead, with a reason.';
      would.className = 'hint noop';
      would.hidden = false;
    } else if (d.status === 'open' && !d.replayable) {
      would.textContent = 'Not replayable: ' + (d.not_replayable_reason || 'the API refuses it') + '.';
      would.className = 'hint fail';
      would.hidden = false;
    } else if (d.status === 'open' && d.error_class === 'permanent') {
      would.textContent = 'Permanent error: a replay will fail the same way unless its cause was fixed.';
      would.className = 'hint noop';
      would.hidden = false;
    } else {
      would.hidden = true;
    }
    // Replay is the primary action only when it can help.
    const replayPrimary = d.replayable && d.error_class !== 'permanent' && d.error_class !== 'poison' &&
      !(d.replay_would && d.replay_would.outcome === 'noop');
    $('replay-btn').className = 'btn ' + (replayPrimary ? 'primary' : '');
    $('replay-btn').textContent = d.error_class === 'permanent' ? 'Replay anyway…' : 'Replay';

    const dl = $('detail-fields');
    dl.replaceChildren();
    if (d.replay) {
      const out = el('span', d.replay.outcome === 'noop' ? 'no-op: ' + d.replay.message : d.replay.message,
        'outcome ' + (d.replay.outcome === 'noop' ? 'noop' : 'ok'));
      out.id = 'detail-outcome';
      field(dl, 'Replay outcome', out);
    }
    if ((d.failed_again_as || []).length) {
      const again = el('span', 'failed again as ', 'outcome fail');
      again.id = 'failed-again';
      d.failed_again_as.forEach((n, i) => {
        if (i) again.appendChild(document.createTextNode(', '));
        again.appendChild(letterLink(n));
      });
      field(dl, 'After replay', again);
    }
    field(dl, 'Source', d.source);
    let origin = d.original_topic;
    if (d.original_partition !== null) origin += ' / partition ' + d.original_partition;
    if (d.original_offset !== null) origin += ' / offset ' + d.original_offset;
    field(dl, 'Origin', origin);
    field(dl, 'Consumer group', d.consumer_group);
    field(dl, 'Outbox row', d.outbox_id);
    field(dl, 'Partition key', d.partition_key);
    field(dl, 'Event type', d.event_type);
    field(dl, 'Correlation id', d.correlation_id);
    field(dl, 'Error class', d.error_class);
    field(dl, 'Retries', d.retry_count);
    field(dl, 'First failure', fmtTime(d.first_failure_at));
    field(dl, 'Failed at', fmtTime(d.failed_at) + ' (' + ago(d.failed_at) + ')');
    field(dl, 'Replays', d.replay_count + (d.replay_outbox_id ? ' (outbox row ' + d.replay_outbox_id + ')' : ''));
    field(dl, 'Resolved by', d.resolved_by);
    field(dl, 'Resolved at', d.resolved_at ? fmtTime(d.resolved_at) : '');
    field(dl, 'Reason', d.resolution_reason);
    $('detail-error').textContent = d.error;
    const h = $('detail-history');
    h.replaceChildren();
    for (const a of d.retry_history || []) {
      const tr = el('tr');
      tr.appendChild(el('td', fmtTime(a.at), 'time'));
      const c = el('td');
      c.appendChild(badge(a.class, a.class));
      tr.appendChild(c);
      tr.appendChild(el('td', a.error));
      h.appendChild(tr);
    }
    if (!h.children.length) emptyRow(h, 3, 'No attempts recorded.');
    $('detail-encoding').textContent = {
      json: '(redacted JSON)', base64: '(not JSON: base64)', hidden: '(not JSON: shown to operators only)',
    }[d.payload_encoding] || d.payload_encoding;
    $('detail-payload').textContent = JSON.stringify(d.payload, null, 2);
    $('detail-headers').textContent = JSON.stringify(d.headers, null, 2);
    const open = d.status === 'open';
    setActionsEnabled(true);
    $('resolved-note').hidden = open;
    loadPayout(d);
  }

  function emptyRow(body, cols, text) {
    const tr = el('tr');
    const td = el('td', text, 'muted');
    td.colSpan = cols;
    tr.appendChild(td);
    body.appendChild(tr);
  }

  async function loadPayout(d) {
    const sec = $('payout');
    const id = d.subject && d.subject.payout_id;
    if (!id) { sec.hidden = true; return; }
    sec.hidden = false;
    $('payout-title').textContent = 'Payout ' + id;
    $('payout-status').textContent = 'Loading…';
    $('payout-fields').replaceChildren();
    $('payout-transitions').replaceChildren();
    $('payout-attempts').replaceChildren();
    const r = await api('GET', '/v1/payouts/' + encodeURIComponent(id));
    if (!state.shown || state.shown.id !== d.id) return;
    if (!r.ok) {
      $('payout-status').textContent = r.status === 404 ? 'No payout ' + id + ' in this database.' : describeError(r);
      return;
    }
    const p = r.data;
    const s = $('payout-status');
    s.replaceChildren();
    s.appendChild(document.createTextNode('State '));
    s.appendChild(el('strong', p.status, 'payout-state'));
    s.appendChild(document.createTextNode(' since ' + fmtTime(p.updated_at)));
    const dl = $('payout-fields');
    field(dl, 'User', p.user_id);
    field(dl, 'Amount', money(p.amount, p.currency));
    field(dl, 'Destination', p.provider + ' ' + p.destination);
    field(dl, 'Attempts', p.attempts);
    field(dl, 'PSP reference', p.psp_reference);
    field(dl, 'PSP status', p.psp_status);
    field(dl, 'Last error', p.last_error);
    const t = $('payout-transitions');
    for (const x of p.transitions) {
      const tr = el('tr');
      tr.appendChild(el('td', fmtTime(x.at), 'time'));
      tr.appendChild(el('td', (x.from || '∅') + ' → ' + x.to));
      tr.appendChild(el('td', x.attempt, 'num'));
      tr.appendChild(el('td', x.error || ''));
      t.appendChild(tr);
    }
    if (!t.children.length) emptyRow(t, 4, 'No transitions recorded.');
    const a = $('payout-attempts');
    for (const x of p.psp_attempts) {
      const tr = el('tr');
      tr.appendChild(el('td', fmtTime(x.at), 'time'));
      tr.appendChild(el('td', x.attempt, 'num'));
      tr.appendChild(el('td', x.kind));
      tr.appendChild(el('td', x.outcome));
      tr.appendChild(el('td', x.error || ''));
      a.appendChild(tr);
    }
    if (!a.children.length) emptyRow(a, 5, 'No calls to the PSP recorded.');
  }

  // kind is 'ok' (republished / discarded), 'noop' (accepted, changed
  // nothing: never the success colour) or 'fail'.
  function showResult(kind, text, extra) {
    const p = $('action-result');
    p.hidden = false;
    p.className = 'result ' + kind;
    p.textContent = text;
    if (extra) p.appendChild(extra);
  }

  function showConfirm(text, label, run) {
    $('confirm-text').textContent = text;
    $('confirm-go').textContent = label;
    state.confirm = run;
    $('confirm').hidden = false;
    setActionsEnabled(true);
    $('reason').focus();
  }

  function hideConfirm() {
    $('confirm').hidden = true;
    state.confirm = null;
  }

  function askReplay() {
    const d = state.shown;
    if (!d || state.busy) return;
    if (d.error_class === 'permanent') {
      showConfirm('Replay 1 letter (#' + d.id + ')? It failed with a permanent error (' + d.error +
        '), so a replay only helps if its cause was fixed. A reason is required.', 'Replay 1 letter', () => act('replay', true));
      return;
    }
    act('replay', false);
  }

  function askDiscard() {
    const d = state.shown;
    if (!d || state.busy) return;
    showConfirm('Discard 1 letter (#' + d.id + (d.subject && d.subject.payout_id ? ', payout ' + d.subject.payout_id : '') +
      ')? It will not be processed again. A reason is required.', 'Discard 1 letter', () => act('discard', true));
  }

  async function act(action, needsReason) {
    const d = state.shown;
    if (!d || state.busy) return;
    const id = d.id;
    const reason = $('reason').value.trim();
    if (needsReason && !reason) {
      showResult('fail', 'A reason is required to ' + action + ' this letter.');
      $('reason').focus();
      return;
    }
    state.busy = true;
    setActionsEnabled(false);
    $('actions').setAttribute('aria-busy', 'true');
    const seq = state.loadSeq;
    const r = await api('POST', '/v1/dead-letters/' + id + '/' + action, reason ? { reason: reason } : undefined);
    state.busy = false;
    $('actions').removeAttribute('aria-busy');
    if (seq !== state.loadSeq) { setActionsEnabled(true); return; } // another letter was opened meanwhile
    hideConfirm();
    if (r.ok && action === 'replay' && r.data.outcome === 'noop') {
      showResult('noop', r.status + ' Accepted, no-op: dead letter #' + id + ' closed; ' + r.data.message + '.');
    } else if (r.ok && action === 'replay') {
      showResult('ok', r.status + ' Accepted: dead letter #' + id + ' republished as outbox row ' + r.data.outbox_id +
        '; the relay publishes it to ' + r.data.dead_letter.original_topic + '. If it fails again it comes back as a new letter, linked here.');
    } else if (r.ok) {
      showResult('ok', r.status + ' OK: dead letter #' + id + ' discarded by ' + r.data.dead_letter.resolved_by + '.');
    } else {
      showResult('fail', describeError(r));
    }
    if (r.ok) $('reason').value = '';
    const again = await api('GET', '/v1/dead-letters/' + id);
    if (seq === state.loadSeq && again.ok) {
      state.shown = again.data;
      renderDetail(again.data); // keeps the result shown next to the buttons
    } else {
      setActionsEnabled(true);
    }
    refresh();
  }

  // ---- bulk ----

  function pickedCount() { return state.allMatching ? state.allCount : state.picked.size; }

  function renderBulk() {
    const n = pickedCount();
    $('bulk-count').textContent = state.allMatching
      ? 'All ' + n + ' open letters matching the filter selected'
      : n + ' selected';
    $('bulk-replay').disabled = n === 0 || !!state.bulk;
    $('bulk-discard').disabled = n === 0 || !!state.bulk;
    $('bulk-all').disabled = state.allMatching;
    $('bulk-clear').disabled = n === 0 && !state.allMatching;
    applyRole();
    for (const b of document.querySelectorAll('#letters .pick')) {
      const id = Number(b.closest('tr').dataset.id);
      const it = state.items.find((x) => x.id === id);
      b.checked = state.allMatching || state.picked.has(id);
      b.disabled = state.allMatching || !it || it.status !== 'open';
    }
  }

  function bulkBody() {
    if (state.allMatching) return filterBody();
    return { ids: Array.from(state.picked).sort((a, b) => a - b) };
  }

  async function selectAllMatching() {
    const r = await api('POST', '/v1/dead-letters/discard', Object.assign(filterBody(), { dry_run: true, max: MAX_BULK }));
    if (!r.ok) { bulkResult('fail', describeError(r)); return; }
    state.allMatching = true;
    state.allCount = r.data.matched;
    state.picked.clear();
    renderBulk();
  }

  function clearPicks() {
    state.picked.clear();
    state.allMatching = false;
    state.allCount = 0;
    $('pick-page').checked = false;
    renderBulk();
  }

  function bulkResult(kind, text) {
    const p = $('bulk-result');
    p.hidden = !text;
    p.className = 'result ' + kind;
    p.textContent = text;
  }

  // A bulk action starts with a dry run: the count the person confirms is
  // the API's, not the page's.
  async function askBulk(action) {
    if (state.bulk) return;
    const n = pickedCount();
    const body = bulkBody();
    const max = state.allMatching ? MAX_BULK : n;
    $('bulk-replay').disabled = true;
    $('bulk-discard').disabled = true;
    bulkResult('', '');
    const r = await api('POST', '/v1/dead-letters/' + action, Object.assign({}, body, { dry_run: true, max: max }));
    if (!r.ok) { bulkResult('fail', 'Dry run refused: ' + describeError(r)); renderBulk(); return; }
    const count = action === 'replay' ? r.data.would_replay : r.data.discarded;
    if (count === 0) { bulkResult('noop', 'Dry run: no open letter matches; nothing to ' + action + '.'); renderBulk(); return; }
    state.bulk = { action: action, body: body, max: max, count: count };
    $('bulk-preview').textContent = 'Dry run: ' + (action === 'replay' ? 'replay ' : 'discard ') + count + ' letter' + (count === 1 ? '' : 's') +
      ' (' + r.data.matched + ' open ' + (r.data.matched === 1 ? 'match' : 'matches') + ')' +
      (r.data.ids.length ? ', starting with #' + r.data.ids.slice(0, 10).join(', #') + (r.data.ids.length > 10 ? '…' : '') : '') + '.' +
      (action === 'replay' ? ' A replay job replays them one by one; you can follow and cancel it here.' : ' Discarded letters are not processed again.');
    $('bulk-go').textContent = (action === 'replay' ? 'Replay ' : 'Discard ') + count + ' letter' + (count === 1 ? '' : 's');
    $('bulk-go').className = 'btn ' + (action === 'replay' ? 'primary' : 'danger');
    $('bulk-reason').value = '';
    $('bulk-go').disabled = true;
    $('bulk-confirm').hidden = false;
    renderBulk();
    $('bulk-reason').focus();
  }

  function cancelBulk() {
    state.bulk = null;
    $('bulk-confirm').hidden = true;
    renderBulk();
  }

  async function runBulk() {
    const b = state.bulk;
    const reason = $('bulk-reason').value.trim();
    if (!b || !reason || $('bulk-go').disabled) return;
    $('bulk-go').disabled = true;
    $('bulk-cancel').disabled = true;
    const r = await api('POST', '/v1/dead-letters/' + b.action, Object.assign({}, b.body, { max: b.max, reason: reason }));
    $('bulk-cancel').disabled = false;
    state.bulk = null;
    $('bulk-confirm').hidden = true;
    if (!r.ok) {
      bulkResult('fail', describeError(r));
      renderBulk();
      return;
    }
    clearPicks();
    if (b.action === 'discard') {
      bulkResult('ok', r.status + ' OK: ' + r.data.discarded + ' letter' + (r.data.discarded === 1 ? '' : 's') + ' discarded (' +
        (r.data.ids.length ? '#' + r.data.ids.join(', #') : 'none') + ').');
    } else {
      bulkResult('', '');
      followJob(r.data);
    }
    refresh();
  }

  function followJob(job) {
    state.job = job;
    $('job').hidden = false;
    renderJob();
    applyRole();
    clearTimeout(state.jobTimer);
    const tick = async () => {
      const r = await api('GET', '/v1/replay-jobs/' + state.job.id);
      if (r.ok) { state.job = r.data; renderJob(); }
      if (r.ok && ['done', 'failed', 'cancelled'].includes(r.data.status)) {
        refresh();
        return;
      }
      state.jobTimer = setTimeout(tick, 400);
    };
    state.jobTimer = setTimeout(tick, 200);
  }

  function renderJob() {
    const j = state.job;
    $('job-title').textContent = 'Replay job #' + j.id;
    $('job-status').textContent = j.status;
    $('job-status').className = 'badge ' + j.status;
    const total = Math.min(j.matched || j.max, j.max) || 1;
    const doneN = j.replayed + j.noop + j.failed + j.skipped;
    $('job-progress').max = total;
    $('job-progress').value = Math.min(doneN, total);
    let text = doneN + ' of ' + total + ' handled: ' + j.replayed + ' republished, ' + j.noop + ' no-op, ' +
      j.failed + ' failed, ' + j.skipped + ' skipped';
    if (j.status === 'cancelled') text += ' (cancelled)';
    if (j.last_error) text += '. Last error: ' + j.last_error;
    $('job-text').textContent = text + '.';
    const finished = ['done', 'failed', 'cancelled'].includes(j.status);
    $('job-cancel').disabled = finished;
    $('job-cancel').hidden = finished;
  }

  async function cancelJob() {
    const j = state.job;
    if (!j) return;
    $('job-cancel').disabled = true;
    const r = await api('POST', '/v1/replay-jobs/' + j.id + '/cancel');
    if (r.ok) { state.job = r.data; renderJob(); } else if (r.status !== 409) {
      $('job-text').textContent = 'Cancel failed: ' + describeError(r);
      $('job-cancel').disabled = false;
    }
  }

  // ---- keyboard ----

  function rows() { return Array.from($('letters').children); }

  function moveFocus(delta) {
    const all = rows();
    if (!all.length) return;
    const cur = document.activeElement && document.activeElement.closest ? document.activeElement.closest('#letters tr') : null;
    let i = cur ? all.indexOf(cur) + delta : (delta > 0 ? 0 : all.length - 1);
    if (!cur && state.shown) {
      const s = all.findIndex((tr) => Number(tr.dataset.id) === state.shown.id);
      if (s >= 0) i = s + delta;
    }
    i = Math.max(0, Math.min(all.length - 1, i));
    all[i].focus();
  }

  function onKey(e) {
    const t = e.target;
    const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
    if (e.key === 'Escape' && !$('detail').hidden && !typing) { closeLetter(true); return; }
    if (typing || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === 'j') { e.preventDefault(); moveFocus(1); }
    if (e.key === 'k') { e.preventDefault(); moveFocus(-1); }
  }

  // ---- theme ----

  function applyTheme() {
    const root = document.documentElement;
    if (state.theme === 'auto') root.removeAttribute('data-theme'); else root.setAttribute('data-theme', state.theme);
    const b = $('theme');
    b.textContent = 'Theme: ' + state.theme;
    b.setAttribute('aria-label', 'Colour theme: ' + (state.theme === 'auto' ? 'follow the system' : state.theme) + '. Press to change.');
  }

  // ---- wiring ----

  function restart() {
    state.cursors = [''];
    state.page = 0;
    state.next = '';
    refresh();
  }

  async function start() {
    if (!state.token) return;
    if (!(await loadMe())) return;
    await refresh();
    scheduleRefresh();
  }

  function applyURL() {
    const u = readURL();
    state.filter = u.filter;
    filterToInputs();
    setView(u.view, false);
    return u;
  }

  function init() {
    $('token').value = state.token;
    $('tz').value = state.tz;
    applyTheme();
    for (const e of document.querySelectorAll('.tz-name')) e.textContent = tzName();
    const u = applyURL();

    $('token-save').addEventListener('click', async () => {
      state.token = $('token').value.trim();
      sessionStorage.setItem(TOKEN_KEY, state.token);
      notice('');
      state.cursors = [''];
      state.page = 0;
      await start();
      const letter = readURL().letter;
      if (letter && (!state.shown || state.shown.id !== letter)) openLetter(letter, false);
    });
    $('token').addEventListener('keydown', (e) => { if (e.key === 'Enter') $('token-save').click(); });
    $('token-clear').addEventListener('click', () => {
      state.token = '';
      state.role = '';
      $('token').value = '';
      $('me').hidden = true;
      sessionStorage.removeItem(TOKEN_KEY);
      $('letters').replaceChildren();
      clearInterval(state.refreshTimer);
      closeLetter(false);
      applyRole();
      $('list-status').textContent = 'Enter a token to load dead letters.';
    });
    $('filters').addEventListener('submit', (e) => {
      e.preventDefault();
      state.filter = inputsToFilter();
      clearPicks();
      pushURL(state.shown ? state.shown.id : 0);
      restart();
    });
    $('f-reset').addEventListener('click', () => {
      state.filter = { status: 'open' };
      filterToInputs();
      clearPicks();
      pushURL(state.shown ? state.shown.id : 0);
      restart();
    });
    $('tz').addEventListener('change', () => {
      const since = state.filter.since, until = state.filter.until;
      state.tz = $('tz').value;
      localStorage.setItem(TZ_KEY, state.tz);
      for (const e of document.querySelectorAll('.tz-name')) e.textContent = tzName();
      state.filter.since = since;
      state.filter.until = until;
      filterToInputs();
      renderFreshness();
      refresh();
      if (state.shown) renderDetail(state.shown);
    });
    $('theme').addEventListener('click', () => {
      state.theme = { auto: 'dark', dark: 'light', light: 'auto' }[state.theme] || 'auto';
      localStorage.setItem(THEME_KEY, state.theme);
      applyTheme();
    });
    $('view-letters').addEventListener('click', () => { setView('letters', true); refresh(); });
    $('view-groups').addEventListener('click', () => { setView('groups', true); refresh(); });
    $('page-next').addEventListener('click', () => {
      if (!state.next) return;
      state.page += 1;
      state.cursors[state.page] = state.next;
      loadList();
    });
    $('page-first').addEventListener('click', () => { state.page = 0; loadList(); });
    $('replay-btn').addEventListener('click', askReplay);
    $('discard-btn').addEventListener('click', askDiscard);
    $('confirm-go').addEventListener('click', () => { if (state.confirm && !state.busy) state.confirm(); });
    $('confirm-cancel').addEventListener('click', () => { hideConfirm(); setActionsEnabled(true); });
    $('detail-close').addEventListener('click', () => closeLetter(true));
    $('pick-page').addEventListener('change', () => {
      for (const it of state.items) {
        if (it.status !== 'open') continue;
        if ($('pick-page').checked) state.picked.add(it.id); else state.picked.delete(it.id);
      }
      state.allMatching = false;
      renderBulk();
    });
    $('bulk-all').addEventListener('click', selectAllMatching);
    $('bulk-clear').addEventListener('click', () => { cancelBulk(); clearPicks(); });
    $('bulk-replay').addEventListener('click', () => askBulk('replay'));
    $('bulk-discard').addEventListener('click', () => askBulk('discard'));
    $('bulk-reason').addEventListener('input', () => { $('bulk-go').disabled = !$('bulk-reason').value.trim(); });
    $('bulk-go').addEventListener('click', runBulk);
    $('bulk-cancel').addEventListener('click', cancelBulk);
    $('job-cancel').addEventListener('click', cancelJob);
    document.addEventListener('keydown', onKey);
    window.addEventListener('popstate', () => {
      const v = applyURL();
      state.cursors = [''];
      state.page = 0;
      refresh();
      if (v.letter) { if (!state.shown || state.shown.id !== v.letter) openLetter(v.letter, false); } else closeLetter(false);
    });
    setInterval(renderFreshness, 1000);
    applyRole();
    if (state.token) {
      start().then(() => { if (u.letter) openLetter(u.letter, false); });
    }
  }

  document.addEventListener('DOMContentLoaded', init);
})();
