// The overview: machines per state, recent events and the cluster. It
// follows the machine list; each change also refreshes the cluster and the
// recent events (the machine list answers at least every 30 s, so the
// cluster view is never older than that).

import { get, machines as live, enc } from './api.js';
import { h, section, table, empty, ago, when, num, stateBadge, errorBox } from './dom.js';
import { rows as prepare, STATES, BASE_STATES } from './fleet.js';

const RECENT_EVENTS = 15;

export function mount(main) {
  const ctrl = new AbortController();
  const statesBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const eventsBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const clusterBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Overview')),
    h('div', { class: 'cols overview' },
      section('Machines by state', statesBox),
      section('Cluster', clusterBox)),
    section('Recent events', eventsBox));

  let busy = false;
  let again = false;
  async function refresh(list) {
    if (busy) { again = true; return; }
    busy = true;
    try {
      await Promise.all([cluster(), recent(list)]);
    } finally {
      busy = false;
      if (again && !ctrl.signal.aborted) { again = false; refresh(live.data); }
    }
  }

  function states(list) {
    const rows = prepare(list);
    const counts = Object.fromEntries(BASE_STATES.map((s) => [s, 0]));
    for (const s of STATES) if (!(s in counts) && rows.some((r) => r.state === s)) counts[s] = 0;
    for (const r of rows) counts[r.state] = (counts[r.state] || 0) + 1;
    const total = rows.length || 1;
    statesBox.replaceChildren(
      h('p', { class: 'big' }, h('a', { href: '#/machines' }, `${num(rows.length)} machines`)),
      h('ul', { class: 'state-bars' }, Object.entries(counts).map(([s, n]) => h('li', {},
        h('a', { href: `#/machines?state=${enc(s)}`, 'aria-label': `${n} machines in state ${s}` },
          stateBadge(s), h('span', { class: 'n' }, num(n))),
        h('span', { class: `bar state-${s}`, 'aria-hidden': 'true', style: null, dataset: { w: String(Math.round((100 * n) / total)) } })))));
    for (const b of statesBox.querySelectorAll('.bar')) b.style.width = `${b.dataset.w}%`;
    if (!rows.length) {
      statesBox.append(h('p', {}, 'No machines yet. A server appears when it network-boots on a VLAN this appliance serves.'));
    }
  }

  async function cluster() {
    try {
      const [hl, c] = await Promise.all([
        get('/api/v1/health', { auth: false, signal: ctrl.signal }).catch((e) => ({ data: e.body })),
        get('/api/v1/cluster', { signal: ctrl.signal }),
      ]);
      const health = hl.data || {};
      const cv = c.data;
      const nodes = new Map((cv.nodes || []).map((n) => [n.name, n]));
      clusterBox.replaceChildren(
        h('dl', { class: 'facts inline' },
          h('dt', {}, 'Health'), h('dd', {}, h('span', { class: `badge ${health.ok ? 'ok' : 'bad'}` }, health.ok ? 'ok' : (health.reason || 'no leader'))),
          h('dt', {}, 'Leader'), h('dd', {}, cv.leader || 'none'),
          h('dt', {}, 'This node'), h('dd', {}, `${cv.node} (${health.state || '?'})`),
          h('dt', {}, 'Applied index'), h('dd', {}, num(health.applied_index))),
        table('Cluster members', [
          { label: 'Node', get: (m) => m.id },
          { label: 'Role', get: (m) => (m.leader ? h('span', { class: 'badge ok' }, 'leader') : m.voter ? 'voter' : 'non-voter') },
          { label: 'Reachable', get: (m) => (m.reachable ? 'yes' : h('span', { class: 'bad' }, m.error || 'no')) },
          { label: 'Raft state', get: (m) => (m.status?.diverged ? h('span', { class: 'bad', title: m.status.diverged }, 'damaged store') : m.status?.state) },
          { label: 'Parts failed', get: (m) => {
            const bad = (m.status?.parts || []).filter((p) => p.state === 'failed');
            return bad.length ? h('span', { class: 'bad' }, bad.map((p) => `${p.name}: ${p.error}`).join('; ')) : 'none';
          } },
          { label: 'Applied', get: (m) => num(m.status?.applied_index), cls: 'num' },
          { label: 'Last contact', get: (m) => (m.status?.last_contact ? ago(m.status.last_contact) : '—') },
          { label: 'API', get: (m) => nodes.get(m.id)?.http_addr || '—' },
          { label: 'Build', get: (m) => m.status?.build || (m.status ? 'no version gate' : '—') },
        ], cv.members || []),
        gateNote(cv.members || []),
        h('p', { class: 'muted small fingerprint' }, `CA fingerprint ${cv.ca_fingerprint} · `,
          h('a', { href: '/ca.pem', download: 'rollcall-ca.pem', class: 'ca-pem' }, 'CA certificate')));
      if (!health.leader) window.dispatchEvent(new Event('rollcall:unhealthy'));
    } catch (e) {
      if (e.name !== 'AbortError') clusterBox.replaceChildren(errorBox(e));
    }
  }

  // What the leader's version gate waits for (nothing while nothing is
  // pending): a new body version is written only once every member reads it.
  function gateNote(members) {
    const g = members.find((m) => m.leader)?.status?.gate;
    if (!g) return '';
    return h('div', { class: 'gate' },
      h('p', {}, `Version gate: ${(g.pending || []).join(', ')} not open yet.`),
      h('ul', {}, ...(g.waiting || []).map((w) => h('li', {}, `waiting for ${w}`))));
  }

  // The fleet's newest events (GET /api/v1/events), named from the list.
  async function recent(list) {
    const names = new Map(prepare(list).map((r) => [r.id, r.name]));
    try {
      const x = await get(`/api/v1/events?limit=${RECENT_EVENTS}`, { signal: ctrl.signal });
      const evs = (x.data.events || []).map((e) => ({ ...e, name: names.get(e.machine) || e.machine }));
      eventsBox.replaceChildren(evs.length ? table('Recent events, newest first', [
        { label: 'Machine', get: (e) => h('a', { href: `#/machines/${enc(e.machine)}` }, e.name) },
        { label: 'When', get: (e) => h('time', { datetime: e.time, title: when(e.time) }, ago(e.time).textContent) },
        { label: 'Kind', get: (e) => e.kind },
        { label: 'Message', get: (e) => e.message },
      ], evs) : empty('No events yet.'));
    } catch (e) {
      if (e.name !== 'AbortError') eventsBox.replaceChildren(errorBox(e));
    }
  }

  const unsubscribe = live.subscribe((data, err) => {
    if (err && !data) { statesBox.replaceChildren(errorBox(err)); return; }
    if (!data) return;
    states(data);
    refresh(data);
  });

  return () => { unsubscribe(); ctrl.abort(); };
}
