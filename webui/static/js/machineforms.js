// The forms that change one machine or a selection of them: add, rename,
// the BMC (its password field write-only), location and tags. Each is a
// dialog that stays open while the API refuses, with the refusal beside
// the field it concerns.

import { get, post, put, del, enc } from './api.js';
import { h } from './dom.js';
import { formDialog, trimmed, split } from './forms.js';
import { asset } from './fleet.js';

const path = (m) => `/api/v1/machines/${enc(m.id)}`;
const nameOf = (m) => m.name || m.id;

// addMachineDialog is POST /api/v1/machines: a machine added by hand, in
// state new. It resolves with the new machine, or null.
export function addMachineDialog() {
  return formDialog({
    title: 'Add a machine',
    body: [h('p', {}, 'A machine added by hand starts in state new. It needs a name or a boot MAC; it is recognised by its MACs when it network-boots.')],
    fields: [
      { name: 'name', label: 'Name', help: 'A DNS label: lowercase letters, digits and -.', placeholder: 'r12-n07' },
      { name: 'mac', label: 'Boot MAC', placeholder: '52:54:00:12:34:56', match: /\bmac\b(?!s)/i },
      { name: 'macs', label: 'Other MACs', help: 'Separated by spaces or commas.' },
    ],
    confirm: 'Add machine',
    submit: async (v) => {
      const body = trimmed({ name: v.name, mac: v.mac, macs: split(v.macs) });
      return (await post('/api/v1/machines', body)).data;
    },
  });
}

// renameDialog gives a machine a new name (POST …/rename). A name that
// is taken or not a DNS label comes back about the field name.
export function renameDialog(m) {
  return formDialog({
    title: `Rename ${nameOf(m)}`,
    fields: [{ name: 'name', label: 'New name', value: m.name || '', required: true, help: 'A DNS label: lowercase letters, digits and -, unique in the fleet. Templates and DNS see the new name at once.' }],
    confirm: 'Rename',
    submit: async (v) => (await post(`${path(m)}/rename`, { name: v.name.trim() })).data,
  });
}

let driversCache = null;
async function drivers() {
  if (!driversCache) {
    try {
      driversCache = (await get('/api/v1/bmc/drivers')).data?.drivers || [];
    } catch {
      return [];
    }
  }
  return driversCache;
}

// bmcDialog sets a machine's BMC (PUT …/bmc). The password field starts
// empty whatever is on record: the API never returns one, and the page
// never fills one in. Left empty, the machine keeps no password.
export async function bmcDialog(m) {
  const b = m.bmc || {};
  const list = await drivers();
  // The driver list names its fields Name and Description.
  const names = list.length
    ? list.map((d) => [d.name ?? d.Name, (d.description ?? d.Description) ? `${d.name ?? d.Name} — ${d.description ?? d.Description}` : d.name ?? d.Name])
    : [['ipmi', 'ipmi'], ['redfish', 'redfish'], ['manual', 'manual']];
  const settings = Object.entries(b.settings || {}).map(([k, v]) => `${k}=${v}`).join('\n');
  return formDialog({
    title: `BMC of ${nameOf(m)}`,
    body: [h('p', {}, 'The password is sealed on the nodes as soon as it arrives and is never shown again, here or anywhere.'),
      b.has_password ? h('p', { class: 'muted' }, 'A password is on record. Type it again to keep one: a BMC saved with this field empty has no password.') : null],
    fields: [
      { name: 'driver', label: 'Driver', type: 'select', value: b.driver || names[0][0], options: names },
      { name: 'address', label: 'Address', value: b.address || '', placeholder: '10.0.40.12 or bmc.example:623', help: 'Host or host:port. Not needed for manual.' },
      { name: 'user', label: 'User', value: b.user || '', autocomplete: 'off' },
      { name: 'password', label: 'Password', type: 'password', help: 'Write-only.' },
      { name: 'settings', label: 'Driver settings', type: 'textarea', rows: 3, value: settings, help: 'One key=value a line (cipher=17, profile=dell).', match: /\bsettings?\b/i },
      { name: 'verify', label: 'Log in once to check the credentials', type: 'checkbox' },
    ],
    confirm: 'Save BMC',
    submit: async (v) => {
      const kv = {};
      for (const line of v.settings.split('\n').map((x) => x.trim()).filter(Boolean)) {
        const i = line.indexOf('=');
        if (i <= 0) {
          const e = new Error(`settings: "${line}" is not key=value`);
          e.field = 'settings';
          throw e;
        }
        kv[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      const body = { driver: v.driver, address: v.address.trim(), user: v.user.trim(), settings: kv, verify: v.verify };
      if (v.password) body.password = v.password;
      const r = await put(`${path(m)}/bmc`, body);
      return r.data || {};
    },
  });
}

// clearBMCDialog makes the machine forget its BMC (DELETE …/bmc, as the
// CLI's `bmc clear ID`): driver, address, user, settings and the sealed
// password all go, and it is powered by hand until a BMC is set again.
export function clearBMCDialog(m) {
  return formDialog({
    title: `Clear the BMC of ${nameOf(m)}`,
    body: [h('p', {}, 'The machine keeps no BMC driver, address, user or password, and is powered by hand until a BMC is set again (here, with the CLI, or by its next commissioning).'),
      h('p', { class: 'warn' }, 'The sealed password is dropped.')],
    fields: [],
    confirm: 'Clear BMC',
    danger: true,
    submit: async () => (await del(`${path(m)}/bmc`)).data || {},
  });
}

const locationFields = (loc = {}, one = true) => [
  { name: 'building', label: 'Building', value: loc.building || '' },
  { name: 'room', label: 'Room', value: loc.room || '' },
  { name: 'rack', label: 'Rack', value: loc.rack || '', help: 'A rack is created (42U) the first time a machine is placed in it.' },
  // The API names units U24 or U20-21 ("… at U20-21 and … at U21 in rack R5
  // share a unit"): those messages are about this field, not the rack's.
  { name: 'unit', label: 'Unit', type: 'number', min: 1, max: 99, value: loc.unit || '', help: one ? 'The lowest unit it takes, 1 at the bottom.' : 'Leave empty for several machines: two machines in one unit are refused.',
    match: [/\bunit\b/i, /\bU\d+\b/] },
  { name: 'height', label: 'Height (units)', type: 'number', min: 1, max: 99, value: loc.height || '', help: 'A 2U server takes two units.' },
  { name: 'asset', label: 'Asset tag', value: asset(loc), match: /\basset[ _]?(tag)?\b/i },
];

// locationDialog places one machine (PUT …/location) or several at once
// (POST /api/v1/locations).
export function locationDialog(ms) {
  const one = ms.length === 1;
  const list = ms.slice(0, 5).map(nameOf).join(', ') + (ms.length > 5 ? `, and ${(ms.length - 5).toLocaleString('en')} more` : '');
  return formDialog({
    title: one ? `Location of ${nameOf(ms[0])}` : `Set location: ${ms.length.toLocaleString('en')} machines`,
    body: [h('p', {}, one ? 'Where the machine stands. Tag rules and templates see it as .Node.Building, .Node.Room, .Node.Rack and .Node.Unit.'
      : `For ${list}. Only the fields you fill in are sent.`)],
    fields: locationFields(one ? ms[0].location : {}, one),
    confirm: one ? 'Save location' : `Set location of ${ms.length.toLocaleString('en')} machines`,
    submit: async (v) => {
      if (one) {
        const body = { building: v.building.trim(), room: v.room.trim(), rack: v.rack.trim(), unit: v.unit ?? 0, height: v.height ?? 0, asset: v.asset.trim() };
        return (await put(`${path(ms[0])}/location`, body)).data || {};
      }
      const body = { machines: ms.map((m) => m.id), ...trimmed({ building: v.building, room: v.room, rack: v.rack, unit: v.unit, height: v.height, asset: v.asset }) };
      return (await post('/api/v1/locations', body)).data || {};
    },
  });
}

// tagsDialog adds and removes one machine's manual tags.
export function tagsDialog(m) {
  return formDialog({
    title: `Tags of ${nameOf(m)}`,
    body: [h('p', {}, (m.tags || []).length ? `Given by hand: ${m.tags.join(', ')}.` : 'No tags given by hand.'),
      (m.auto_tags || []).length ? h('p', { class: 'muted' }, `From match rules: ${m.auto_tags.join(', ')} (they follow their rules).`) : null],
    fields: [
      { name: 'add', label: 'Add tags', help: 'Names separated by spaces or commas; a tag must exist (Tags page).', match: /\b(tag|add)\b/i },
      { name: 'remove', label: 'Remove tags', match: /\bremove\b/i },
    ],
    confirm: 'Change tags',
    submit: async (v) => (await post(`${path(m)}/tags`, { add: split(v.add), remove: split(v.remove) })).data || {},
  });
}
