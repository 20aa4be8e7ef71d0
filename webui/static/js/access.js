// Access: who may act on the cluster and what they did. The cluster CA
// (GET /api/v1/ca: the current root and the roots a rotation replaced that
// are still trusted; Rotate CA… makes a new root, POST /api/v1/ca/rotate),
// the signed-in identity (the admin token or an administrator's
// certificate), the certificates the cluster CA recorded (revocable here:
// an administrator's is refused from its next request, a node's at the
// handshake), and the audit log (GET /api/v1/audit), newest first.

import { get, post, del, enc, hasRoute } from './api.js';
import { h, section, table, dl, when, errorBox, announce } from './dom.js';
import { dialog } from './actions.js';

const STATE = { valid: 'ok', revoked: 'bad', expired: 'warn' };

// TRANSITIONS are the choices for how long a replaced root stays trusted
// (the API takes 1h to 8760h).
const TRANSITIONS = [
  ['24h', '24h (1 day)'],
  ['168h', '168h (7 days)'],
  ['720h', '720h (30 days, the default)'],
  ['2160h', '2160h (90 days)'],
  ['8760h', '8760h (365 days)'],
];

export function mount(main) {
  const ctrl = new AbortController();
  const who = h('p', { class: 'access-who muted' }, 'Asking who you are…');
  const certs = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const audit = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const ca = h('div', { class: 'ca-state' }, h('p', { class: 'muted' }, 'Loading…'));
  const caNotice = h('div', { class: 'notice-slot ca-notice' });
  // Offered once the node says it serves the rotation (an older node
  // during a rolling upgrade does not).
  const rotateBtn = h('button', { type: 'button', class: 'danger-text rotate-ca', hidden: true, onclick: () => rotate() }, 'Rotate CA…');
  let current = null;
  main.append(h('h1', {}, 'Access'), who,
    section('Certificate authority',
      h('p', { class: 'muted' }, 'The root every node and client checks. Compare its fingerprint with the one a client pinned; ',
        h('a', { href: '/ca.pem', download: 'rollcall-ca.pem', class: 'ca-pem' }, 'the CA bundle'),
        ' holds it and the roots still trusted after a rotation.'),
      h('div', { class: 'actionbar' }, rotateBtn), caNotice, ca),
    section('Certificates', h('p', { class: 'muted' }, 'Administrators get theirs with rollcall admin-cert request NAME (the key stays on their machine); services with rollcall ca issue.'), certs),
    section('Audit log', audit));

  async function loadCA() {
    try {
      const r = await get('/api/v1/ca', { signal: ctrl.signal });
      drawCA(r.data);
    } catch (e) {
      if (e.name !== 'AbortError') ca.replaceChildren(errorBox(e, loadCA));
    }
  }

  function drawCA(st) {
    current = st;
    const prev = st.previous || [];
    ca.replaceChildren(
      dl([
        ['Fingerprint', h('code', { class: 'fingerprint ca-fingerprint' }, `SHA256:${st.fingerprint}`)],
        ['Subject', st.subject],
        ['Serial', h('code', {}, st.serial)],
        ['Valid', `${when(st.not_before)} to ${when(st.not_after)}`],
        ['Rotated', st.rotated ? h('span', { class: 'ca-rotated' }, `at ${when(st.rotated)} by ${st.rotated_by || '—'}`) : null],
      ], 'facts inline'),
      h('h3', {}, 'Previous roots still trusted'),
      prev.length
        ? table('Previous roots still trusted', [
          { label: 'Fingerprint', get: (p) => h('code', { class: 'fingerprint' }, `SHA256:${p.fingerprint}`) },
          { label: 'Subject', get: (p) => p.subject },
          { label: 'Trusted until', get: (p) => when(p.trusted_until) },
        ], prev, { rowClass: () => 'ca-previous' })
        : h('p', { class: 'muted' }, 'None: no rotation is in its transition.'));
  }

  function load() {
    loadCA();
    loadLists();
  }

  async function loadLists() {
    try {
      const [w, c, a] = await Promise.all([
        get('/api/v1/whoami', { signal: ctrl.signal }),
        get('/api/v1/ca/certificates', { signal: ctrl.signal }),
        get('/api/v1/audit?limit=200', { signal: ctrl.signal })]);
      who.replaceChildren(`Signed in as ${w.data.actor} (by ${w.data.via}).`);
      certs.replaceChildren(table('Certificates', [
        { label: 'Kind', get: (x) => x.kind },
        { label: 'Name', get: (x) => x.name },
        { label: 'Serial', get: (x) => h('code', {}, x.serial) },
        { label: 'State', get: (x) => h('span', { class: `badge ${STATE[x.state] || ''}` }, x.state) },
        { label: 'Until', get: (x) => when(x.not_after) },
        { label: 'Names', get: (x) => [...(x.hosts || []), ...(x.permit || [])].join(', ') || '—' },
        { label: 'Issued by', get: (x) => x.issued_by || '—' },
        { label: '', get: (x) => x.state === 'valid' && x.kind !== 'node'
          ? h('button', { type: 'button', class: 'revoke', 'data-serial': x.serial, onclick: () => revoke(x) }, 'Revoke') : '' },
      ], c.data.certificates || [], { rowClass: (x) => `cert-${x.kind} cert-${x.state}` }));
      audit.replaceChildren((a.data.events || []).length === 0
        ? h('p', { class: 'muted' }, 'Nothing yet: every administrator\'s write appears here.')
        : table('Audit log', [
          { label: 'When', get: (e) => when(e.time) },
          { label: 'Who', get: (e) => e.actor },
          { label: 'From', get: (e) => e.from || '—' },
          { label: 'Node', get: (e) => e.node || '—' },
          { label: 'Action', get: (e) => e.action },
          { label: 'Target', get: (e) => e.target || '—' },
          { label: 'Outcome', get: (e) => h('span', { class: `badge ${e.outcome === 'ok' ? 'ok' : 'bad'}` }, e.outcome) },
        ], a.data.events, { rowClass: (e) => `audit-${e.outcome === 'ok' ? 'ok' : 'failed'}` }));
    } catch (e) {
      if (e.name !== 'AbortError') certs.replaceChildren(errorBox(e, loadLists));
    }
  }

  async function revoke(x) {
    if (!window.confirm(`Revoke ${x.kind} certificate ${x.serial} of ${x.name}? It is refused from its next use.`)) return;
    try {
      await del(`/api/v1/ca/certificates/${enc(x.serial)}`);
      announce(`Certificate ${x.serial} revoked`);
      loadLists();
    } catch (e) {
      certs.prepend(errorBox(e));
    }
  }

  // rotate asks for a new root after a confirmation that says what it
  // does, with the transition the operator picks.
  async function rotate() {
    const v = await dialog({
      title: 'Rotate the cluster CA',
      body: [
        h('p', {}, `A new root replaces SHA256:${current ? current.fingerprint : '…'}. Every node re-issues its certificates under the new root, without a restart.`),
        h('p', { class: 'warn' }, 'Clients (rollcall, browsers, services that check the cluster CA) must take the new CA before the transition ends: after it, the old root is no longer trusted and they fail to connect. Give them /ca.pem, checked by the new fingerprint.'),
      ],
      fields: [{ name: 'transition', label: 'Transition: how long the old root stays trusted', type: 'select', value: '720h', options: TRANSITIONS }],
      confirm: 'Rotate', danger: true,
    });
    if (!v) return;
    rotateBtn.disabled = true;
    caNotice.replaceChildren();
    try {
      const { data } = await post('/api/v1/ca/rotate', { yes: true, transition: v.transition });
      announce(`Cluster CA rotated: new fingerprint SHA256:${data.fingerprint}`);
      caNotice.replaceChildren(h('div', { class: 'alert form-ok', role: 'status' },
        h('p', {}, h('strong', {}, 'Cluster CA rotated. '), 'New fingerprint ', h('code', { class: 'fingerprint ca-new-fingerprint' }, `SHA256:${data.fingerprint}`), '.'),
        h('p', {}, 'Every node now re-issues its certificates under the new root; give clients the new CA before the transition ends.')));
      drawCA(data);
      loadLists();
    } catch (e) {
      caNotice.replaceChildren(h('div', { class: 'alert error', role: 'alert' },
        h('p', {}, h('strong', {}, 'The CA was not rotated. '), e.message)));
    } finally {
      rotateBtn.disabled = false;
    }
  }

  hasRoute('POST', '/api/v1/ca/rotate').then((ok) => { rotateBtn.hidden = !ok; });
  load();
  return () => ctrl.abort();
}
