// Stateless nodes' faces on the machines: Assign profile… and Unassign…
// (on the machine page and as bulk actions of the machines list), the
// node name and heartbeat the list shows beside each assigned machine, and
// the machine page's node card. The nodes come from GET
// /api/v1/stateless/nodes (api.statelessNodes), joined by machine ID.

import { get, post, enc, hasRoute, statelessNodes } from './api.js';
import { h, section, dl, when, ago } from './dom.js';
import { ACTIONS, ACTION_ORDER } from './actions.js';

const path = (m) => `/api/v1/machines/${enc(m.id)}`;

const assign = {
  label: 'Assign profile…',
  group: 'lifecycle',
  describe: 'make a stateless node of',
  detail: 'It boots the profile\'s image into memory with the profile\'s overlays, under a name from the profile\'s name pool and with addresses from its subnets. Only a ready machine is assigned.',
  // prepare offers the profiles there are.
  prepare: async () => {
    const { data } = await get('/api/v1/profiles');
    const profiles = data.profiles || [];
    if (!profiles.length) throw new Error('There are no profiles yet: add one on the Profiles page first.');
    return {
      fields: [
        { name: 'profile', label: 'Profile', type: 'select', value: profiles[0].name,
          options: profiles.map((p) => [p.name, `${p.name} (image ${p.image}, ${p.nodes} ${p.nodes === 1 ? 'node' : 'nodes'})`]) },
        { name: 'boot', label: 'Power-cycle now', type: 'checkbox',
          help: 'Through the BMC, so that it boots the profile at once. Without this, it does on its next network boot.' },
      ],
    };
  },
  confirmLabel: 'Assign',
  run: async (m, v) => {
    const { data } = await post(`${path(m)}/assign`, { profile: v.profile, boot: v.boot });
    const n = data.node || {};
    let text = `node ${n.name} of ${n.profile}${(n.addresses || []).length ? ` (${n.addresses.join(', ')})` : ''}`;
    if (data.power_job) text += `; power cycle job ${data.power_job}`;
    if (data.power_error) text += `; not power-cycled: ${data.power_error}`;
    return { ok: true, text };
  },
};

const unassign = {
  label: 'Unassign…',
  group: 'lifecycle',
  destructive: true,
  describe: 'unassign',
  detail: 'It goes back to ready: the node name and addresses are freed and the node token stops working, so the running system can no longer fetch its overlays.',
  warn: 'The system running in memory is not stopped: power the machine off or cycle it.',
  confirmLabel: 'Unassign',
  run: async (m) => {
    const { data: n } = await post(`${path(m)}/unassign`);
    return { ok: true, text: `ready; was node ${n.name} of ${n.profile}` };
  },
};

// registerActions adds Assign profile… and Unassign… to the machine
// actions, before Re-commission.
export function registerActions() {
  if (ACTIONS.assign) return;
  ACTIONS.assign = assign;
  ACTIONS.unassign = unassign;
  const at = ACTION_ORDER.indexOf('recommission');
  ACTION_ORDER.splice(at < 0 ? ACTION_ORDER.length : at, 0, 'assign', 'unassign');
}

// followNodes calls fn with a Map of machine ID → node on every answer
// (and every 30 s), if this node serves the route; it returns the
// unsubscribe function.
export function followNodes(fn) {
  let unsubscribe = null;
  let stopped = false;
  hasRoute('GET', '/api/v1/stateless/nodes').then((ok) => {
    if (!ok || stopped) return;
    unsubscribe = statelessNodes.subscribe((d) => {
      if (d) fn(new Map((d.nodes || []).map((n) => [n.machine, n])));
    });
  });
  return () => { stopped = true; unsubscribe?.(); };
}

// heartbeatText is a node's heartbeat in words: not booted yet, or when
// it was last seen.
export function heartbeatText(n) {
  if (!isSet(n.booted)) return 'not booted yet';
  return `booted, seen ${isSet(n.last_seen) ? ago(n.last_seen).textContent : 'never'}`;
}

const isSet = (t) => !!t && !t.startsWith('0001-');

// nodeSummary is the machines list's Node cell: the name, then the
// heartbeat, with a stale badge when the heartbeats stopped.
export function nodeSummary(n) {
  const title = [`node ${n.name} of profile ${n.profile}`, isSet(n.booted) ? `booted ${when(n.booted)}` : 'not booted yet',
    isSet(n.last_seen) ? `last seen ${when(n.last_seen)}` : null, n.stale ? 'stale: no heartbeat for two refreshes and a minute' : null].filter(Boolean).join('; ');
  return h('span', { class: 'node-cell', title },
    h('span', { class: 'node-name' }, n.name), ' ',
    h('span', { class: 'node-beat muted' }, isSet(n.booted) ? heartbeatText(n).replace(/^booted, /, '') : 'not booted'),
    n.stale ? [' ', h('span', { class: 'badge bad stale' }, 'stale')] : null);
}

// nodeCard is the machine page's Stateless node card.
export function nodeCard(n) {
  const card = section('Stateless node', dl([
    ['Node name', h('strong', {}, n.name)],
    ['Profile', h('a', { href: `#/profiles/${enc(n.profile)}` }, n.profile)],
    ['Addresses', (n.addresses || []).length ? h('ul', { class: 'plain' }, n.addresses.map((a) => h('li', {}, a))) : 'none (the profile names no subnet)'],
    ['Heartbeat', h('span', {}, heartbeatText(n), n.stale ? [' ', h('span', { class: 'badge bad stale' }, 'stale')] : null)],
    ['Booted', isSet(n.booted) ? when(n.booted) : null],
    ['Last seen', isSet(n.last_seen) ? when(n.last_seen) : null],
    ['Assigned', when(n.assigned)],
    ['Generation', String(n.generation)],
    ['SSH host key', n.ssh_host_key_pub ? h('code', { class: 'clip', title: n.ssh_host_key_pub }, n.ssh_host_key_pub) : null],
  ]));
  card.id = 'node';
  return card;
}
