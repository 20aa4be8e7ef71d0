// The network model: fabrics, VLANs and subnets, each subnet with its
// ranges and the addresses in use. All of it follows the node through
// blocking queries on the lists (they share one change index).

import { get, watch, enc, machines } from './api.js';
import { h, section, table, empty, num, when, errorBox } from './dom.js';

export function mount(main, route) {
  const [, kind, a, b] = route.parts;
  if (kind === 'subnets' && a && b) return subnetPage(main, `${a}/${b}`);
  return overviewPage(main);
}

const subnetHref = (cidr) => `#/network/subnets/${cidr.split('/').map(enc).join('/')}`;

function overviewPage(main) {
  const ctrl = new AbortController();
  const fabricsBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const vlansBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const subnetsBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Network')),
    section('Subnets', subnetsBox),
    h('div', { class: 'cols' }, section('Fabrics', fabricsBox), section('VLANs', vlansBox)));

  let fabrics = null;
  let vlans = null;
  let subnets = null;
  function draw() {
    if (fabrics) {
      const count = new Map();
      for (const v of vlans || []) count.set(v.fabric, (count.get(v.fabric) || 0) + 1);
      fabricsBox.replaceChildren(fabrics.length ? table('Fabrics', [
        { label: 'Fabric', get: (f) => f.name },
        { label: 'Kind', get: (f) => f.kind },
        { label: 'VLANs', get: (f) => num(count.get(f.name) || 0), cls: 'num' },
        { label: 'Created', get: (f) => when(f.created) },
      ], fabrics) : empty('No fabrics yet. Add one with rollcall fabric add NAME.'));
    }
    if (vlans) {
      vlansBox.replaceChildren(vlans.length ? table('VLANs', [
        { label: 'VLAN', get: (v) => `${v.fabric} / ${v.vid === 0 ? 'untagged' : v.vid}` },
        { label: 'MTU', get: (v) => String(v.mtu || '—'), cls: 'num' },
        { label: 'DHCP', get: (v) => h('span', { class: `badge ${v.dhcp === 'off' ? '' : 'ok'}` }, v.dhcp) },
        { label: 'Served by', get: (v) => (v.servers?.length ? v.servers.map((s) => `${s.node} (${s.iface})`).join(', ') : '—') },
      ], vlans) : empty('No VLANs yet.'));
    }
    if (subnets) {
      subnetsBox.replaceChildren(subnets.length ? table('Subnets', [
        { label: 'Subnet', get: (s) => h('a', { href: subnetHref(s.cidr) }, s.cidr) },
        { label: 'Name', get: (s) => s.name },
        { label: 'Purpose', get: (s) => s.purpose },
        { label: 'VLAN', get: (s) => `${s.fabric} / ${s.vid === 0 ? 'untagged' : s.vid}` },
        { label: 'Gateway', get: (s) => s.gateway },
        { label: 'DNS', get: (s) => (s.dns?.length ? s.dns.join(', ') : '—') },
        { label: 'Used', get: (s) => num(s.used), cls: 'num' },
      ], subnets) : empty('No subnets yet. Add one with rollcall subnet add CIDR -fabric NAME -vid N.'));
    }
  }
  const fail = (box) => (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); };
  watch('/api/v1/fabrics', (d) => { fabrics = d.fabrics || []; draw(); }, { signal: ctrl.signal, onError: fail(fabricsBox) });
  watch('/api/v1/vlans', (d) => { vlans = d.vlans || []; draw(); }, { signal: ctrl.signal, onError: fail(vlansBox) });
  watch('/api/v1/subnets', (d) => { subnets = d.subnets || []; draw(); }, { signal: ctrl.signal, onError: fail(subnetsBox) });
  return () => ctrl.abort();
}

function subnetPage(main, cidr) {
  const ctrl = new AbortController();
  const factsBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const rangesBox = h('div', {});
  const ipsBox = h('div', {});
  main.append(
    h('div', { class: 'page-head' },
      h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/network' }, 'Network'), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, cidr)),
      h('h1', {}, `Subnet ${cidr}`)),
    section('Subnet', factsBox), section('Ranges', rangesBox), section('Addresses in use', ipsBox));

  const path = `/api/v1/subnets/${cidr.split('/').map(enc).join('/')}`;
  async function load() {
    try {
      const r = await get(path, { signal: ctrl.signal });
      const s = r.data;
      factsBox.replaceChildren(h('dl', { class: 'facts' },
        ...[['Name', s.name], ['Purpose', s.purpose], ['VLAN', `${s.fabric} / ${s.vid === 0 ? 'untagged' : s.vid}`],
          ['Gateway', s.gateway], ['DNS', s.dns?.join(', ')], ['Domain', s.domain], ['Addresses in use', num(s.used)], ['Created', when(s.created)]]
          .filter(([, v]) => v).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
      const ranges = s.ranges || [];
      rangesBox.replaceChildren(ranges.length ? table(`Ranges of ${cidr}`, [
        { label: 'Kind', get: (x) => h('span', { class: `badge range-${x.kind}` }, x.kind) },
        { label: 'First', get: (x) => x.first },
        { label: 'Last', get: (x) => x.last },
        { label: 'Comment', get: (x) => x.comment },
      ], ranges) : empty('No ranges: addresses are handed out only when given explicitly.'));
    } catch (e) {
      if (e.name === 'AbortError') return;
      factsBox.replaceChildren(errorBox(e));
    }
  }
  load();
  // Names for the machines that hold addresses, from the shared list.
  let names = new Map();
  let lastIPs = null;
  const drawIPs = () => {
    if (!lastIPs) return;
    ipsBox.replaceChildren(lastIPs.length ? table(`Addresses in use in ${cidr}`, [
      { label: 'Address', get: (a) => a.ip },
      { label: 'How', get: (a) => a.how },
      { label: 'Machine', get: (a) => (a.machine ? h('a', { href: `#/machines/${enc(a.machine)}` }, names.get(a.machine) || a.machine) : a.name || '—') },
      { label: 'Interface', get: (a) => a.interface },
      { label: 'Since', get: (a) => when(a.created) },
    ], lastIPs) : empty('No address in use.'));
  };
  const unsubscribe = machines.subscribe((d) => {
    if (!d) return;
    names = new Map((d.machines || []).map((m) => [m.id, m.name || m.id]));
    drawIPs();
  });
  let first = true;
  watch(`/api/v1/ips?subnet=${enc(cidr)}`, (d) => {
    if (!first) load();
    first = false;
    lastIPs = d.addresses || [];
    drawIPs();
  }, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) ipsBox.replaceChildren(errorBox(e)); } });
  return () => { ctrl.abort(); unsubscribe(); };
}
