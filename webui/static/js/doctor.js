// The doctor: this node's checks (GET /api/v1/doctor), as `rollcall
// doctor` prints them: each ok, warn or fail, with what to do. Run on
// demand (the probes take a few seconds: a DHCP probe on every served
// VLAN listens for four).

import { get } from './api.js';
import { h, section, table, when, errorBox } from './dom.js';

const BADGE = { ok: 'ok', warn: 'warn', fail: 'bad' };

export function mount(main) {
  const ctrl = new AbortController();
  const box = h('div', {}, h('p', { class: 'muted' }, 'Running the checks…'));
  const again = h('button', { type: 'button', class: 'doctor-run', disabled: true }, 'Run again');
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Doctor'), again), section('Checks of this node', box));

  async function run() {
    again.disabled = true;
    box.replaceChildren(h('p', { class: 'muted', role: 'status' }, 'Running the checks…'));
    try {
      const r = (await get('/api/v1/doctor', { signal: ctrl.signal })).data;
      const failed = (r.checks || []).filter((c) => c.status === 'fail').length;
      box.replaceChildren(
        h('p', { class: 'doctor-verdict' }, h('span', { class: `badge ${r.ok ? 'ok' : 'bad'}` }, r.ok ? 'all checks pass' : `${failed} failed`),
          ` on node ${r.node}, ${when(r.time)}`),
        table('Checks', [
          { label: 'Check', get: (c) => c.name },
          { label: 'Status', get: (c) => h('span', { class: `badge ${BADGE[c.status] || ''}` }, c.status) },
          { label: 'What it found', get: (c) => c.message },
          { label: 'What to do', get: (c) => c.fix || '—' },
        ], r.checks || [], { rowClass: (c) => `check-${c.status}` }));
    } catch (e) {
      if (e.name !== 'AbortError') box.replaceChildren(errorBox(e, run));
    } finally {
      again.disabled = false;
    }
  }
  again.onclick = run;
  run();
  return () => ctrl.abort();
}
