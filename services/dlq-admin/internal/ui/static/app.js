// dlq-admin's page. Everything comes from the /v1 API with the operator's
// token; the DOM is built with textContent only, so nothing a dead letter
// carries is ever interpreted as HTML.
'use strict';

(function () {
  const TOKEN_KEY = 'aegis.dlq-admin.token';
  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    cursors: [''], // cursor of each page seen; [0] is the first page
    page: 0,
    next: '',
    selected: null,
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function badge(text, kind) {
    const known = ['open', 'replayed', 'discarded', 'permanent', 'transient', 'poison', 'unknown'];
    return el('span', text, 'badge ' + (known.includes(kind) ? kind : 'other'));
  }

  function utc(iso) {
    if (!iso) return '—';
    return iso.replace('T', ' ').replace(/(\.\d+)?Z$/, '');
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return '—';
    const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600), m = Math.floor(seconds % 3600 / 60);
    if (d > 0) return d + 'd ' + h + 'h';
    if (h > 0) return h + 'h ' + m + 'm';
    if (m > 0) return m + 'm';
    return seconds + 's';
  }

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

  function toRFC3339(local) {
    if (!local) return '';
    const d = new Date(local);
    return isNaN(d.getTime()) ? '' : d.toISOString();
  }

  function query() {
    const q = new URLSearchParams();
    const put = (k, v) => { if (v) q.set(k, v); };
    put('topic', $('f-topic').value);
    put('status', $('f-status').value);
    put('error_class', $('f-class').value.trim());
    put('since', toRFC3339($('f-since').value));
    put('until', toRFC3339($('f-until').value));
    put('limit', $('f-limit').value);
    put('cursor', state.cursors[state.page]);
    return q.toString();
  }

  async function loadStats() {
    const r = await api('GET', '/v1/dead-letters/stats');
    if (!r.ok) return;
    const s = r.data;
    $('stat-open').textContent = s.by_status.open;
    $('stat-replayed').textContent = s.by_status.replayed;
    $('stat-discarded').textContent = s.by_status.discarded;
    $('stat-oldest').textContent = age(s.oldest_open_age_seconds);
    const sel = $('f-topic');
    const current = sel.value;
    const have = new Set(Array.from(sel.options).map((o) => o.value));
    for (const t of s.topics) {
      if (!have.has(t.topic)) sel.appendChild(el('option', t.topic));
    }
    sel.value = current;
  }

  async function loadList() {
    if (!state.token) {
      $('list-status').textContent = 'Enter a token to load dead letters.';
      return;
    }
    $('list-status').textContent = 'Loading…';
    const r = await api('GET', '/v1/dead-letters?' + query());
    const body = $('letters');
    body.replaceChildren();
    if (!r.ok) {
      $('list-status').textContent = describeError(r);
      if (r.status === 401) notice('The token was refused (401). Check it and press “Use token”.');
      updatePager();
      return;
    }
    notice('');
    for (const it of r.data.items) {
      const tr = el('tr');
      tr.dataset.id = it.id;
      if (state.selected === it.id) tr.classList.add('selected');
      tr.appendChild(el('td', it.id, 'num'));
      tr.appendChild(el('td', utc(it.failed_at), 'time'));
      tr.appendChild(el('td', it.original_topic));
      const cls = el('td');
      cls.appendChild(badge(it.error_class, it.error_class));
      tr.appendChild(cls);
      const err = el('td', it.error, 'err');
      err.title = it.error;
      tr.appendChild(err);
      const st = el('td');
      st.appendChild(badge(it.status, it.status));
      tr.appendChild(st);
      tr.addEventListener('click', () => openLetter(it.id));
      body.appendChild(tr);
    }
    state.next = r.data.next_cursor || '';
    const n = r.data.items.length;
    $('list-status').textContent = n === 0 ? 'No dead letters match.' : n + ' dead letter' + (n === 1 ? '' : 's') + ' on this page.';
    updatePager();
  }

  function updatePager() {
    $('page-first').disabled = state.page === 0;
    $('page-next').disabled = !state.next;
    $('page-label').textContent = 'Page ' + (state.page + 1);
  }

  function field(dl, name, value) {
    dl.appendChild(el('dt', name));
    dl.appendChild(el('dd', value === null || value === undefined || value === '' ? '—' : value));
  }

  async function openLetter(id) {
    state.selected = id;
    for (const tr of $('letters').children) tr.classList.toggle('selected', Number(tr.dataset.id) === id);
    const r = await api('GET', '/v1/dead-letters/' + id);
    if (!r.ok) {
      showResult(false, describeError(r));
      return;
    }
    renderDetail(r.data);
  }

  function renderDetail(d) {
    $('detail').hidden = false;
    $('detail-title').textContent = 'Dead letter #' + d.id;
    const st = $('detail-status');
    st.textContent = d.status;
    st.className = 'badge ' + d.status;
    const dl = $('detail-fields');
    dl.replaceChildren();
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
    field(dl, 'First failure', utc(d.first_failure_at));
    field(dl, 'Failed at', utc(d.failed_at));
    field(dl, 'Replays', d.replay_count + (d.replay_outbox_id ? ' (outbox row ' + d.replay_outbox_id + ')' : ''));
    field(dl, 'Replay outcome', d.replay ? d.replay.message : '');
    field(dl, 'Failed again as', (d.failed_again_as || []).map((n) => '#' + n).join(', '));
    field(dl, 'Resolved by', d.resolved_by);
    field(dl, 'Resolved at', d.resolved_at ? utc(d.resolved_at) : '');
    field(dl, 'Reason', d.resolution_reason);
    $('detail-error').textContent = d.error;
    const h = $('detail-history');
    h.replaceChildren();
    for (const a of d.retry_history || []) {
      const tr = el('tr');
      tr.appendChild(el('td', utc(a.at), 'time'));
      const c = el('td');
      c.appendChild(badge(a.class, a.class));
      tr.appendChild(c);
      tr.appendChild(el('td', a.error));
      h.appendChild(tr);
    }
    if (!h.children.length) {
      const tr = el('tr');
      const td = el('td', 'No attempts recorded.', 'muted');
      td.colSpan = 3;
      tr.appendChild(td);
      h.appendChild(tr);
    }
    $('detail-encoding').textContent = {
      json: '(redacted JSON)', base64: '(not JSON: base64)', hidden: '(not JSON: shown to operators only)',
    }[d.payload_encoding] || d.payload_encoding;
    $('detail-payload').textContent = JSON.stringify(d.payload, null, 2);
    $('detail-headers').textContent = JSON.stringify(d.headers, null, 2);
    const open = d.status === 'open';
    $('replay-btn').disabled = !open;
    $('discard-btn').disabled = !open;
    $('reason').disabled = !open;
    $('resolved-note').hidden = open;
  }

  // kind is 'ok' (it did something), 'noop' (accepted, changed nothing:
  // never the success colour) or 'fail'.
  function showResult(kind, text) {
    const p = $('action-result');
    p.hidden = false;
    p.className = 'result ' + kind;
    p.textContent = text;
  }

  async function resolve(action) {
    const id = state.selected;
    if (!id) return;
    const reason = $('reason').value.trim();
    const path = '/v1/dead-letters/' + id + '/' + action;
    const r = await api('POST', path, reason || action === 'discard' ? { reason: reason } : undefined);
    if (r.ok && action === 'replay' && r.data.outcome === 'noop') {
      showResult('noop', r.status + ' Accepted, no-op: dead letter #' + id + ' closed; ' + r.data.message + '.');
    } else if (r.ok && action === 'replay') {
      showResult('ok', r.status + ' Accepted: dead letter #' + id + ' replayed as outbox row ' + r.data.outbox_id +
        '; the relay publishes it to ' + r.data.dead_letter.original_topic + '.');
    } else if (r.ok) {
      showResult('ok', r.status + ' OK: dead letter #' + id + ' discarded by ' + r.data.dead_letter.resolved_by + '.');
    } else {
      showResult('fail', describeError(r));
    }
    if (r.ok) $('reason').value = '';
    await Promise.all([loadList(), loadStats()]);
    const again = await api('GET', '/v1/dead-letters/' + id);
    if (again.ok) renderDetail(again.data);
  }

  function restart() {
    state.cursors = [''];
    state.page = 0;
    state.next = '';
    loadList();
    loadStats();
  }

  function init() {
    $('token').value = state.token;
    $('token-save').addEventListener('click', () => {
      state.token = $('token').value.trim();
      sessionStorage.setItem(TOKEN_KEY, state.token);
      restart();
    });
    $('token').addEventListener('keydown', (e) => { if (e.key === 'Enter') $('token-save').click(); });
    $('token-clear').addEventListener('click', () => {
      state.token = '';
      $('token').value = '';
      sessionStorage.removeItem(TOKEN_KEY);
      $('letters').replaceChildren();
      $('detail').hidden = true;
      restart();
    });
    $('f-apply').addEventListener('click', restart);
    $('f-reset').addEventListener('click', () => {
      $('f-topic').value = '';
      $('f-status').value = 'open';
      $('f-class').value = '';
      $('f-since').value = '';
      $('f-until').value = '';
      restart();
    });
    $('page-next').addEventListener('click', () => {
      if (!state.next) return;
      state.page += 1;
      state.cursors[state.page] = state.next;
      loadList();
    });
    $('page-first').addEventListener('click', () => { state.page = 0; loadList(); });
    $('replay-btn').addEventListener('click', () => resolve('replay'));
    $('discard-btn').addEventListener('click', () => resolve('discard'));
    if (state.token) restart();
  }

  document.addEventListener('DOMContentLoaded', init);
})();
