// The inventory a commissioning agent reported (store/inventory.Report),
// rendered as readable sections. The BMC password never reaches the page
// (the node strips it), and this renderer would not show it anyway.

import { h, dl, table, bytes, diskSize, num, when, empty, id as newId } from './dom.js';
import { compareText } from './fleet.js';

const yes = (b) => (b ? 'yes' : 'no');
const list = (xs) => (xs && xs.length ? xs.join(', ') : null);
const join = (...xs) => xs.filter(Boolean).join(' ');

function sec(key, title, count, ...body) {
  const hid = newId('inv');
  return h('section', { class: 'card inv', id: `inv-${key}`, 'aria-labelledby': hid },
    h('h3', { id: hid }, title, count !== undefined ? h('span', { class: 'count-chip' }, String(count)) : null),
    ...body);
}

// sections returns [key, title, element] for every part of the report, in
// the order an operator reads a server: what it is, then compute, memory,
// storage, network, accelerators, the rest.
export function sections(rep) {
  if (!rep) return [];
  const out = [];
  const add = (key, title, el) => out.push([key, title, el]);

  const sys = rep.system || {};
  const bb = rep.baseboard || {};
  const ch = rep.chassis || {};
  const bios = rep.bios || {};
  const mem = rep.memory || {};
  add('system', 'System', sec('system', 'System', undefined, h('div', { class: 'facts-grid' },
    h('div', {}, h('h4', {}, 'System'), dl([['Manufacturer', sys.manufacturer], ['Product', sys.product], ['Version', sys.version],
      ['Serial', sys.serial], ['UUID', sys.uuid], ['SKU', sys.sku], ['Family', sys.family]])),
    h('div', {}, h('h4', {}, 'Baseboard'), dl([['Manufacturer', bb.manufacturer], ['Product', bb.product], ['Version', bb.version],
      ['Serial', bb.serial], ['Asset tag', bb.asset_tag]])),
    h('div', {}, h('h4', {}, 'Chassis and firmware'), dl([['Chassis', join(ch.manufacturer, ch.type)], ['Chassis serial', ch.serial],
      ['Asset tag', ch.asset_tag], ['BIOS', join(bios.vendor, bios.version)], ['BIOS date', bios.date]])),
    h('div', {}, h('h4', {}, 'Report'), dl([['Collected', when(rep.collected)], ['Agent', rep.agent], ['Boot MAC', rep.boot_mac],
      ['Memory', mem.total_bytes ? bytes(mem.total_bytes) : null],
      ['NUMA nodes', mem.numa_nodes_bytes?.length ? mem.numa_nodes_bytes.map(bytes).join(' · ') : null]])))));

  const cpus = rep.cpus || [];
  add('cpus', 'CPUs', sec('cpus', 'CPUs', cpus.length, cpus.length ? table('CPUs', [
    { label: 'Socket', get: (c) => String(c.socket) },
    { label: 'Model', get: (c) => c.model },
    { label: 'Vendor', get: (c) => c.vendor },
    { label: 'Cores', get: (c) => num(c.cores), cls: 'num' },
    { label: 'Threads', get: (c) => num(c.threads), cls: 'num' },
    { label: 'MHz', get: (c) => (c.mhz ? num(c.mhz) : '—'), cls: 'num' },
    { label: 'NUMA', get: (c) => String(c.numa_node), cls: 'num' },
    { label: 'Flags', get: (c) => (c.flags?.length ? h('details', {}, h('summary', {}, `${c.flags.length} flags`), h('p', { class: 'flags' }, c.flags.join(' '))) : '—') },
  ], cpus) : empty('No CPUs reported.')));

  const dimms = [...(rep.dimms || [])].sort((a, b) => compareText(a.bank_locator || '', b.bank_locator || '') || compareText(a.locator, b.locator));
  const filled = dimms.filter((d) => d.size_mb > 0);
  add('memory', 'Memory', sec('memory', 'Memory (DIMMs by slot)', `${filled.length}/${dimms.length}`,
    dimms.length ? [
      h('p', { class: 'muted' }, `${filled.length} of ${dimms.length} slots populated, ${bytes(filled.reduce((s, d) => s + d.size_mb * 1048576, 0))}.`),
      table('DIMMs by slot', [
        { label: 'Slot', get: (d) => d.locator },
        { label: 'Bank', get: (d) => d.bank_locator },
        { label: 'Size', get: (d) => (d.size_mb ? bytes(d.size_mb * 1048576) : 'empty'), cls: 'num' },
        { label: 'Type', get: (d) => join(d.type, d.form_factor) },
        { label: 'Speed', get: (d) => (d.speed_mts ? `${num(d.speed_mts)} MT/s` : '—'), cls: 'num' },
        { label: 'Manufacturer', get: (d) => d.manufacturer },
        { label: 'Part number', get: (d) => d.part_number },
        { label: 'Serial', get: (d) => d.serial },
      ], dimms, { rowClass: (d) => (d.size_mb ? null : 'muted') })]
      : empty('No DIMMs reported.')));

  const disks = rep.disks || [];
  add('disks', 'Disks', sec('disks', 'Disks', disks.length, disks.length ? table('Disks', [
    { label: 'Device', get: (d) => d.name },
    { label: 'Size', get: (d) => diskSize(d.size_bytes), cls: 'num' },
    { label: 'Model', get: (d) => d.model },
    { label: 'Serial', get: (d) => d.serial },
    { label: 'WWN', get: (d) => d.wwn },
    { label: 'Kind', get: (d) => (d.rotational ? 'HDD' : 'SSD') },
    { label: 'Transport', get: (d) => d.transport },
    { label: 'Removable', get: (d) => yes(d.removable) },
  ], disks) : empty('No disks reported.')));

  const nvme = rep.nvme || [];
  add('nvme', 'NVMe', sec('nvme', 'NVMe', nvme.length, nvme.length ? table('NVMe controllers', [
    { label: 'Controller', get: (c) => c.name },
    { label: 'Model', get: (c) => c.model },
    { label: 'Serial', get: (c) => c.serial },
    { label: 'Firmware', get: (c) => c.firmware },
    { label: 'PCI', get: (c) => c.pci_address },
    { label: 'Namespaces', get: (c) => (c.namespaces?.length ? h('ul', { class: 'plain' }, c.namespaces.map((n) => h('li', {}, `${n.name} · ${diskSize(n.size_bytes)}${n.eui64 ? ` · EUI ${n.eui64}` : ''}${n.nguid ? ` · NGUID ${n.nguid}` : ''}`))) : '—') },
  ], nvme) : empty('No NVMe controllers reported.')));

  const nics = rep.nics || [];
  add('nics', 'NICs', sec('nics', 'Network interfaces', nics.length, nics.length ? table('Network interfaces', [
    { label: 'Name', get: (n) => n.name },
    { label: 'MAC', get: (n) => h('code', {}, n.mac) },
    { label: 'Link', get: (n) => h('span', { class: n.link ? 'up' : 'down' }, n.link ? 'up' : 'down') },
    { label: 'Speed', get: (n) => (n.speed_mbps ? (n.speed_mbps >= 1000 ? `${n.speed_mbps / 1000} Gb/s` : `${n.speed_mbps} Mb/s`) : '—'), cls: 'num' },
    { label: 'MTU', get: (n) => (n.mtu ? String(n.mtu) : '—'), cls: 'num' },
    { label: 'Driver', get: (n) => join(n.driver, n.firmware ? `(fw ${n.firmware})` : '') },
    { label: 'PCI', get: (n) => n.pci_address },
    { label: 'Addresses', get: (n) => list(n.ips) },
    { label: 'SR-IOV', get: (n) => (n.sriov_total ? `${n.sriov_num || 0} of ${n.sriov_total} VFs` : '—') },
  ], nics) : empty('No network interfaces reported.')));

  const ib = rep.infiniband || [];
  add('ib', 'InfiniBand', sec('ib', 'InfiniBand', ib.length, ib.length ? table('InfiniBand HCAs', [
    { label: 'HCA', get: (c) => c.name },
    { label: 'Model', get: (c) => c.model },
    { label: 'Node GUID', get: (c) => h('code', {}, c.node_guid) },
    { label: 'Firmware', get: (c) => c.firmware },
    { label: 'PCI', get: (c) => c.pci_address },
    { label: 'Ports', get: (c) => (c.ports?.length ? h('ul', { class: 'plain' }, c.ports.map((p) => h('li', {}, `port ${p.number}: ${[p.state, p.rate, p.link_layer].filter(Boolean).join(', ')}${p.guid ? ` · ${p.guid}` : ''}`))) : '—') },
  ], ib) : empty('No InfiniBand adapters reported.')));

  const gpus = rep.gpus || [];
  add('gpus', 'GPUs', sec('gpus', 'GPUs', gpus.length, gpus.length ? table('GPUs', [
    { label: 'PCI', get: (g) => g.pci_address },
    { label: 'Model', get: (g) => g.model },
    { label: 'Vendor', get: (g) => g.vendor },
    { label: 'Memory', get: (g) => (g.memory_mb ? bytes(g.memory_mb * 1048576) : '—'), cls: 'num' },
    { label: 'NUMA', get: (g) => String(g.numa_node), cls: 'num' },
  ], gpus) : empty('No GPUs reported.')));

  const lldp = rep.lldp || [];
  add('lldp', 'LLDP', sec('lldp', 'LLDP neighbours', lldp.length, lldp.length ? table('LLDP neighbours', [
    { label: 'Interface', get: (l) => l.interface },
    { label: 'Switch', get: (l) => l.system_name },
    { label: 'Port', get: (l) => join(l.port_id, l.port_description && l.port_description !== l.port_id ? `(${l.port_description})` : '') },
    { label: 'Chassis ID', get: (l) => l.chassis_id },
    { label: 'VLAN', get: (l) => (l.vlan ? String(l.vlan) : '—'), cls: 'num' },
  ], lldp) : empty('No LLDP neighbours heard.')));

  add('tpm', 'TPM', sec('tpm', 'TPM', undefined, rep.tpm
    ? dl([['Version', rep.tpm.version], ['Manufacturer', rep.tpm.manufacturer]])
    : empty('No TPM reported.')));

  const pci = rep.pci || [];
  add('pci', 'PCI', sec('pci', 'PCI devices', pci.length, pci.length ? h('details', { class: 'pci' },
    h('summary', {}, `Show all ${pci.length} PCI devices`),
    table('PCI devices', [
      { label: 'Address', get: (p) => h('code', {}, p.address) },
      { label: 'Class', get: (p) => p.class },
      { label: 'Vendor', get: (p) => p.vendor || p.vendor_id },
      { label: 'Device', get: (p) => p.device || p.device_id },
      { label: 'IDs', get: (p) => h('code', {}, `${p.vendor_id}:${p.device_id}`) },
      { label: 'Subsystem', get: (p) => (p.subsystem_vendor_id ? h('code', {}, `${p.subsystem_vendor_id}:${p.subsystem_device_id}`) : '—') },
      { label: 'Driver', get: (p) => p.driver },
      { label: 'NUMA', get: (p) => String(p.numa_node), cls: 'num' },
    ], pci)) : empty('No PCI devices reported.')));

  const b = rep.bmc;
  add('agent-bmc', 'BMC (found)', sec('agent-bmc', 'BMC as the agent found it', undefined, b
    ? dl([['Driver', b.driver], ['Address', b.address], ['MAC', b.mac], ['Channel', b.channel ? String(b.channel) : null],
      ['User ID', b.user_id ? String(b.user_id) : null], ['User', b.user], ['Source', b.source],
      ['Errors', b.errors?.length ? h('ul', { class: 'plain bad' }, b.errors.map((e) => h('li', {}, e))) : null]])
    : empty('The agent found no BMC.')));

  const errs = rep.errors || [];
  if (errs.length) {
    add('errors', 'Collector errors', sec('errors', 'Collector errors', errs.length,
      h('p', {}, 'These parts of the inventory could not be read; the rest of the report is complete.'),
      table('Collector errors', [{ label: 'Collector', get: (e) => e.collector }, { label: 'Error', get: (e) => e.error }], errs)));
  }
  return out;
}
