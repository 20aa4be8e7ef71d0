// Access: who may act on the cluster and what they did. The signed-in
// identity (the admin token or an administrator's certificate), the
// certificates the cluster CA recorded (revocable here: an administrator's
// is refused from its next request, a node's at the handshake), and the
// audit log (GET /api/v1/audit), newest first.

import { get, del, enc } from './api.js';
import { h, section, table, when, errorBox, announce } from './dom.js';

const STATE = { valid: 'ok', revoked: 'bad', expired: 'warn' };

export function mount(main) {
  const ctrl = new AbortController();
  const who = h('p', { class: 'access-who muted' }, 'Asking who you are…');
  const certs = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const audit = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('h1', {}, 'Access'), who,
    section('Certificates', h('p', { class: 'muted' }, 'Administrators get theirs with rollcall admin-cert request NAME (the key stays on their machine); services with rollcall ca issue.'), certs),
    section('Audit log', audit));

  async function load() {
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
      if (e.name !== 'AbortError') certs.replaceChildren(errorBox(e, load));
    }
  }

  async function revoke(x) {
    if (!window.confirm(`Revoke ${x.kind} certificate ${x.serial} of ${x.name}? It is refused from its next use.`)) return;
    try {
      await del(`/api/v1/ca/certificates/${enc(x.serial)}`);
      announce(`Certificate ${x.serial} revoked`);
      load();
    } catch (e) {
      certs.prepend(errorBox(e));
    }
  }
  load();
  return () => ctrl.abort();
}
