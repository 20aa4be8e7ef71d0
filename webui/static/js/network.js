// The network model: fabrics, VLANs and subnets, each subnet with its
// ranges and the addresses in use. All of it follows the node through
// blocking queries on the lists (they share one change index).

import { get, post, put, del, watch, enc, machines } from './api.js';
import { h, section, table, empty, num, when, errorBox } from './dom.js';
import { formDialog, confirmDelete, split, trimmed } from './forms.js';

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
  const add = (label, id, fn) => h('div', { class: 'buttons start' }, h('button', { type: 'button', id, onclick: fn }, label));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Network')),
    section('Subnets', subnetsBox, add('Add subnet…', 'add-subnet', () => subnetDialog(fabrics || [], vlans || []))),
    h('div', { class: 'cols' },
      section('Fabrics', fabricsBox, add('Add fabric…', 'add-fabric', () => fabricDialog())),
      section('VLANs', vlansBox, add('Add VLAN…', 'add-vlan', () => vlanDialog(null, fabrics || [])))));

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
        { label: 'Actions', get: (f) => rowButton('Delete', `Delete fabric ${f.name}`, () => confirmDelete(`fabric ${f.name}`, 'Only a fabric without VLANs or subnets can be deleted.', () => del(`/api/v1/fabrics/${enc(f.name)}`))) },
      ], fabrics) : empty('No fabrics yet.'));
    }
    if (vlans) {
      vlansBox.replaceChildren(vlans.length ? table('VLANs', [
        { label: 'VLAN', get: (v) => `${v.fabric} / ${v.vid === 0 ? 'untagged' : v.vid}` },
        { label: 'MTU', get: (v) => String(v.mtu || '—'), cls: 'num' },
        { label: 'DHCP', get: (v) => h('span', { class: `badge ${v.dhcp === 'off' ? '' : 'ok'}` }, v.dhcp) },
        { label: 'Served by', get: (v) => (v.servers?.length ? v.servers.map((s) => (s.iface ? `${s.node} (${s.iface})` : s.node)).join(', ') : '—') },
        { label: 'Actions', get: (v) => h('span', { class: 'row-buttons' },
          rowButton('Edit', `Edit VLAN ${vlanName(v)}`, () => vlanDialog(v, fabrics || [])),
          rowButton('Delete', `Delete VLAN ${vlanName(v)}`, () => confirmDelete(`VLAN ${vlanName(v)}`, 'Only a VLAN that carries no subnet can be deleted.', () => del(`/api/v1/vlans/${enc(v.fabric)}/${v.vid}`)))) },
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
        { label: 'Actions', get: (s) => rowButton('Delete', `Delete subnet ${s.cidr}`, () => deleteSubnet(s)) },
      ], subnets) : empty('No subnets yet.'));
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
    section('Subnet', factsBox),
    section('Ranges', rangesBox, h('div', { class: 'buttons start' }, h('button', { type: 'button', id: 'add-range', onclick: () => rangeDialog(cidr).then((ok) => { if (ok) load(); }) }, 'Add range…'))),
    section('Addresses in use', ipsBox, h('div', { class: 'buttons start' }, h('button', { type: 'button', id: 'reserve-ip', onclick: () => reserveDialog(cidr) }, 'Reserve address…'))));

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
        { label: 'Actions', get: (x) => rowButton('Delete', `Delete range ${x.first}–${x.last}`, () => confirmDelete(`the ${x.kind} range ${x.first}–${x.last}`, null, () => del(`/api/v1/ranges/${enc(x.first)}`)).then((ok) => { if (ok) load(); })) },
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
      { label: 'Actions', get: (a) => rowButton('Release', `Release ${a.ip}`, () => confirmDelete(`the use of ${a.ip}`, a.machine ? 'The machine keeps the address configured until it is deployed again.' : null, () => del(`/api/v1/ips/${enc(a.ip)}`))) },
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

// ---- forms

const vlanName = (v) => `${v.fabric} / ${v.vid === 0 ? 'untagged' : v.vid}`;

function rowButton(label, aria, fn) {
  return h('button', { type: 'button', class: 'link', 'aria-label': aria, onclick: fn }, label);
}

function fabricDialog() {
  return formDialog({
    title: 'Add a fabric',
    body: [h('p', {}, 'A fabric is a set of VLANs that reach each other: a switch fabric, or an InfiniBand subnet.')],
    fields: [
      { name: 'name', label: 'Name', required: true, placeholder: 'hall-a' },
      { name: 'kind', label: 'Kind', type: 'select', value: 'ethernet', options: [['ethernet', 'Ethernet'], ['infiniband', 'InfiniBand']] },
    ],
    confirm: 'Add fabric',
    submit: async (v) => (await post('/api/v1/fabrics', { name: v.name.trim(), kind: v.kind })).data,
  });
}

// servers reads "node" or "node/iface" entries.
function servers(text) {
  return split(text).map((x) => { const [node, iface = ''] = x.split('/'); return { node, iface }; });
}

function vlanDialog(v, fabrics) {
  const editing = !!v;
  const fields = [
    editing ? null : { name: 'fabric', label: 'Fabric', type: 'select', required: true, value: fabrics[0]?.name || '', options: fabrics.map((f) => [f.name, f.name]) },
    editing ? null : { name: 'vid', label: 'VID', type: 'number', min: 0, max: 4094, required: true, help: '0 is untagged.', match: [/\bvid\b/i, /\b0–4094\b/] },
    { name: 'mtu', label: 'MTU', type: 'number', min: 576, max: 65535, value: v?.mtu || '' },
    { name: 'dhcp', label: 'DHCP', type: 'select', value: v?.dhcp || 'off', options: [['off', 'off: another server answers'], ['full', 'full: hand out addresses and boot'], ['proxy', 'proxy: boot answers only (proxy DHCP)']],
      match: [/\bdhcp mode\b/i, /\bmode "/i] },
    { name: 'servers', label: 'Serving nodes', value: (v?.servers || []).map((s) => (s.iface ? `${s.node}/${s.iface}` : s.node)).join(', '),
      help: 'The appliance nodes that answer on this VLAN: node or node/interface, separated by commas. Needed for full and proxy.', match: [/\bservers?\b/i, /\bnodes?\b/i, /-node\b/i] },
    { name: 'boot_loader', label: 'BIOS boot loader', type: 'select', value: v?.boot_loader || 'ipxe', options: [['ipxe', 'iPXE'], ['pxelinux', 'pxelinux (NICs that cannot run iPXE)']], match: /\bboot[ _]loader\b/i },
  ].filter(Boolean);
  if (!editing && !fabrics.length) {
    return formDialog({ title: 'Add a VLAN', body: [h('p', {}, 'Add a fabric first: a VLAN belongs to one.')], fields: [], confirm: 'OK', submit: async () => ({}) });
  }
  return formDialog({
    title: editing ? `Edit VLAN ${vlanName(v)}` : 'Add a VLAN',
    fields,
    confirm: editing ? 'Save VLAN' : 'Add VLAN',
    submit: async (x) => {
      const common = { mtu: x.mtu ?? 0, dhcp: x.dhcp, servers: servers(x.servers), boot_loader: x.boot_loader };
      if (editing) return (await put(`/api/v1/vlans/${enc(v.fabric)}/${v.vid}`, common)).data;
      return (await post('/api/v1/vlans', { fabric: x.fabric, vid: x.vid, ...common })).data;
    },
  });
}

function subnetDialog(fabrics, vlans) {
  const opts = vlans.map((v) => [`${v.fabric}/${v.vid}`, vlanName(v)]);
  return formDialog({
    title: 'Add a subnet',
    body: [h('p', {}, 'Addresses machines already have in it are adopted.')],
    fields: [
      { name: 'cidr', label: 'CIDR', required: true, placeholder: '10.20.0.0/24', match: [/\bcidr\b/i, /\bprefix\b/i] },
      { name: 'name', label: 'Name', placeholder: 'prov-a' },
      opts.length
        ? { name: 'vlan', label: 'VLAN', type: 'select', value: opts[0][0], options: opts, match: [/\bvlan\b/i, /\bvid\b/i, /\bfabric\b/i] }
        : { name: 'vlan', label: 'VLAN', required: true, placeholder: 'fabric/vid', help: 'A fabric and a VID (0: untagged).', match: [/\bvlan\b/i, /\bvid\b/i, /\bfabric\b/i] },
      { name: 'purpose', label: 'Purpose', type: 'select', value: 'provisioning', options: ['provisioning', 'mgmt', 'bmc', 'storage', 'ib', 'other'].map((x) => [x, x]) },
      { name: 'gateway', label: 'Gateway', placeholder: '10.20.0.1' },
      { name: 'dns', label: 'DNS servers', help: 'Addresses, separated by commas.', match: /\bdns\b/i },
      { name: 'domain', label: 'Domain' },
    ],
    confirm: 'Add subnet',
    submit: async (x) => {
      const [fabric, vidText = ''] = x.vlan.split('/');
      const vid = vidText === '' ? undefined : Number(vidText);
      const body = { cidr: x.cidr.trim(), fabric, vid, ...trimmed({ name: x.name, purpose: x.purpose, gateway: x.gateway, dns: split(x.dns), domain: x.domain }) };
      return (await post('/api/v1/subnets', body)).data;
    },
  });
}

async function deleteSubnet(s) {
  const path = `/api/v1/subnets/${s.cidr.split('/').map(enc).join('/')}`;
  return formDialog({
    title: `Delete subnet ${s.cidr}`,
    body: [h('p', {}, `This will delete subnet ${s.cidr} and its ranges.`), s.used ? h('p', { class: 'warn' }, `${s.used} addresses are in use in it.`) : null],
    fields: [{ name: 'force', label: 'Release its addresses too', type: 'checkbox', help: 'Without this, a subnet with addresses in use is kept.' }],
    confirm: 'Delete subnet',
    danger: true,
    submit: async (v) => (await del(`${path}${v.force ? '?force=1' : ''}`)).data,
  });
}

function rangeDialog(cidr) {
  return formDialog({
    title: `Add a range to ${cidr}`,
    body: [h('p', {}, 'Dynamic ranges are leased by DHCP; reserved ones are never handed out; static ones hold the addresses given to machines.')],
    fields: [
      { name: 'kind', label: 'Kind', type: 'select', value: 'dynamic', options: [['dynamic', 'dynamic'], ['reserved', 'reserved'], ['static', 'static']] },
      { name: 'first', label: 'First address', required: true, match: /\bfirst\b/i },
      { name: 'last', label: 'Last address', required: true, match: /\blast\b/i },
      { name: 'comment', label: 'Comment' },
    ],
    confirm: 'Add range',
    submit: async (v) => (await post('/api/v1/ranges', { subnet: cidr, kind: v.kind, first: v.first.trim(), last: v.last.trim(), comment: v.comment })).data,
  });
}

function reserveDialog(cidr) {
  return formDialog({
    title: `Reserve an address in ${cidr}`,
    body: [h('p', {}, 'A reserved address is held under a name (a switch, a PDU) and never handed out.')],
    fields: [
      { name: 'ip', label: 'Address', required: true, match: [/\bip\b/i, /\baddress\b/i] },
      { name: 'name', label: 'Held by', required: true, placeholder: 'switch-1', match: /\bname\b/i },
    ],
    confirm: 'Reserve',
    submit: async (v) => (await post('/api/v1/ips/reserve', { ip: v.ip.trim(), name: v.name.trim() })).data,
  });
}
