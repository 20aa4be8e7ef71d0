// Racks and their elevations: every unit from the top down, each machine
// drawn over the units it takes, coloured by its state; a click opens it.
// The racks come from GET /api/v1/racks and the machines' places from the
// shared machine list, both followed through blocking queries, so a machine
// placed from the CLI appears here without a reload.

import { watch, put, del, request, enc, machines as liveMachines } from './api.js';
import { h, section, table, empty, num, errorBox, placeChips, stateBadge, id as newId, announce } from './dom.js';
import { Form, formDialog, confirmDelete } from './forms.js';
import { placeText } from './fleet.js';
import { natKey, byKey } from './fleet.js';

const DEFAULT_HEIGHT = 42;

export function mount(main, route) {
  const name = route.parts[1];
  return name ? rackPage(main, name) : listPage(main);
}

// listOf accepts the list as an array or as {racks: […]}.
const listOf = (d, key) => (Array.isArray(d) ? d : (d && d[key]) || []);

// follow keeps racks and machines and calls draw(racks, byRack) on every
// change of either. Racks that machines name but the list lacks (an older
// node) are drawn at the default height.
function follow(signal, draw, onError) {
  let racks = null;
  let ms = null;
  const redraw = () => {
    if (!ms) return;
    const byRack = new Map();
    for (const m of ms) {
      const r = m.location?.rack;
      if (!r) continue;
      if (!byRack.has(r)) byRack.set(r, []);
      byRack.get(r).push(m);
    }
    const known = new Map((racks || []).map((r) => [r.name, r]));
    for (const r of byRack.keys()) if (!known.has(r)) known.set(r, { name: r, height: DEFAULT_HEIGHT, derived: true });
    const list = [...known.values()].sort((a, b) => byKey(natKey(a.name), natKey(b.name)));
    draw(list, byRack, racks !== null);
  };
  watch('/api/v1/racks', (d) => { racks = listOf(d, 'racks'); redraw(); }, {
    signal,
    onError: (e) => {
      if (e.status === 404 || e.status === 405) { racks = []; redraw(); return; } // a node without the racks routes
      onError(e);
    },
  });
  const unsubscribe = liveMachines.subscribe((d, err) => {
    if (err && !d) { onError(err); return; }
    if (!d) return;
    ms = d.machines || [];
    redraw();
  });
  return unsubscribe;
}

function listPage(main) {
  const ctrl = new AbortController();
  const listBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const elevBox = h('div', { class: 'elevations' });
  main.append(
    h('div', { class: 'page-head with-buttons' }, h('h1', {}, 'Racks'),
      h('button', { type: 'button', id: 'add-rack', onclick: () => rackDialog() }, 'Add rack…')),
    h('p', { class: 'muted' }, 'Place machines from the Machines page (select them, then Set location…), from a machine\'s page, or with ',
      h('code', {}, 'rollcall location ID -rack R -unit U'), '. A rack is created the first time a machine is placed in it.'),
    section('Racks', listBox),
    h('h2', { class: 'inv-title' }, 'Elevations'), elevBox,
    importCard());
  const unsubscribe = follow(ctrl.signal, (racks, byRack) => {
    listBox.replaceChildren(racks.length ? table('Racks', [
      { label: 'Rack', get: (r) => h('a', { href: `#/racks/${enc(r.name)}` }, r.name) },
      { label: 'Building', get: (r) => r.building || '—' },
      { label: 'Room', get: (r) => r.room || '—' },
      { label: 'Height', get: (r) => `${r.height || DEFAULT_HEIGHT}U`, cls: 'num' },
      { label: 'Used', get: (r) => `${usedUnits(byRack.get(r.name) || [])}U`, cls: 'num' },
      { label: 'Machines', get: (r) => num((byRack.get(r.name) || []).length), cls: 'num' },
    ], racks) : empty('No racks yet.'));
    elevBox.replaceChildren(...racks.map((r) => elevation(r, byRack.get(r.name) || [], { compact: true })));
  }, (e) => { if (e.status !== 401) listBox.replaceChildren(errorBox(e)); });
  return () => { ctrl.abort(); unsubscribe(); };
}

function rackPage(main, name) {
  const ctrl = new AbortController();
  const head = h('div', { class: 'page-head' },
    h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/racks' }, 'Racks'), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, name)),
    h('h1', {}, `Rack ${name}`));
  const facts = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const elevBox = h('div', { class: 'elevations single' });
  let current = null;
  const buttons = h('div', { class: 'buttons start' },
    h('button', { type: 'button', id: 'edit-rack', onclick: () => rackDialog(current || { name }) }, 'Edit rack…'),
    h('button', { type: 'button', class: 'danger-text', id: 'delete-rack', onclick: () => removeRack(name) }, 'Delete rack…'));
  main.append(head, h('div', { class: 'cols' }, section('Rack', facts, buttons), h('div', {}, elevBox)));
  const unsubscribe = follow(ctrl.signal, (racks, byRack) => {
    const r = racks.find((x) => x.name === name);
    current = r;
    if (!r) {
      facts.replaceChildren(h('div', { class: 'alert', role: 'alert' }, h('p', {}, `There is no rack ${name}. `, h('a', { href: '#/racks' }, 'Back to the racks.'))));
      elevBox.replaceChildren();
      return;
    }
    const ms = byRack.get(name) || [];
    facts.replaceChildren(h('dl', { class: 'facts' },
      ...[['Building', r.building], ['Room', r.room], ['Height', `${r.height || DEFAULT_HEIGHT} units`],
        ['Used', `${usedUnits(ms)} of ${r.height || DEFAULT_HEIGHT} units`], ['Machines', num(ms.length)]]
        .filter(([, v]) => v).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
    elevBox.replaceChildren(elevation(r, ms, { compact: false }));
  }, (e) => { if (e.status !== 401) facts.replaceChildren(errorBox(e)); });
  return () => { ctrl.abort(); unsubscribe(); };
}

function usedUnits(ms) {
  let n = 0;
  for (const m of ms) if (m.location?.unit) n += Math.max(1, m.location.height || 1);
  return n;
}

// elevation draws one rack: unit numbers down the left, the top unit first,
// and each placed machine as a link over its units. Machines in the rack
// without a unit are listed under it.
export function elevation(rack, ms, { compact }) {
  const height = rack.height || DEFAULT_HEIGHT;
  const cap = newId('rack');
  const grid = h('div', { class: 'elevation', style: { '--units': height } });
  for (let u = height; u >= 1; u--) {
    const row = height - u + 1;
    grid.append(
      h('span', { class: 'u-label', style: { gridRow: String(row) }, 'aria-hidden': 'true' }, String(u)),
      h('span', { class: 'u-slot', style: { gridRow: String(row) }, 'aria-hidden': 'true' }));
  }
  const placed = [];
  const loose = [];
  for (const m of ms) {
    const u = m.location?.unit || 0;
    if (u >= 1 && u <= height) placed.push(m); else loose.push(m);
  }
  placed.sort((a, b) => b.location.unit - a.location.unit);
  for (const m of placed) {
    const u = m.location.unit;
    const span = Math.min(Math.max(1, m.location.height || 1), height - u + 1);
    const top = u + span - 1;
    const units = span > 1 ? `U${u}–${top}` : `U${u}`;
    grid.append(h('a', {
      class: `rack-machine state-${m.state || 'unknown'}${span > 1 ? ' tall' : ''}`,
      href: `#/machines/${enc(m.id)}`,
      style: { gridRow: `${height - top + 1} / span ${span}` },
      dataset: { id: m.id, unit: String(u), height: String(span) },
      title: `${m.name || m.id} · ${units} · ${m.state}`,
      'aria-label': `${units}: ${m.name || m.id}, ${m.state}`,
    }, h('span', { class: 'rm-name' }, m.name || m.id), compact ? null : h('span', { class: 'rm-state' }, m.state)));
  }
  const place = placeChips({ building: rack.building, room: rack.room }, { link: false });
  return h('figure', { class: `rack${compact ? ' compact' : ''}`, 'aria-labelledby': cap, dataset: { rack: rack.name } },
    h('figcaption', { id: cap },
      compact ? h('a', { href: `#/racks/${enc(rack.name)}` }, rack.name) : h('strong', {}, rack.name),
      ' ', h('span', { class: 'muted' }, `${height}U · ${usedUnits(placed)}U used`),
      rack.building || rack.room ? h('div', {}, place) : null),
    grid,
    loose.length ? h('div', { class: 'loose' }, h('p', { class: 'muted' }, 'In this rack, unit not known:'),
      h('ul', { class: 'plain' }, loose.map((m) => h('li', {}, h('a', { href: `#/machines/${enc(m.id)}` }, m.name || m.id), ' ', stateBadge(m.state))))) : null);
}

// rackDialog creates a rack or changes one (PUT /api/v1/racks/{name}).
function rackDialog(r) {
  const editing = !!r;
  return formDialog({
    title: r ? `Edit rack ${r.name}` : 'Add a rack',
    body: [h('p', {}, 'A rack cannot be made lower than the highest unit a machine in it takes. Its building and room are where its machines stand.')],
    fields: [
      { name: 'name', label: 'Name', value: r?.name || '', required: true, readonly: editing, help: 'What the rack\'s label says: letters, digits, ., _ or -.', placeholder: 'R12' },
      { name: 'building', label: 'Building', value: r?.building || '' },
      { name: 'room', label: 'Room', value: r?.room || '' },
      { name: 'height', label: 'Height (units)', type: 'number', min: 1, max: 99, value: r?.height || DEFAULT_HEIGHT, match: [/\bheight\b/i, /\bunits?\b/i] },
    ],
    confirm: editing ? 'Save rack' : 'Add rack',
    submit: async (v) => (await put(`/api/v1/racks/${enc(v.name.trim())}`, { building: v.building.trim(), room: v.room.trim(), height: v.height ?? DEFAULT_HEIGHT })).data || {},
  });
}

async function removeRack(name) {
  const ok = await confirmDelete(`rack ${name}`, 'Only an empty rack can be deleted: move its machines first.', async () => (await del(`/api/v1/racks/${enc(name)}`)).data || {});
  if (ok) location.hash = '#/racks';
}

// importCard imports a location CSV (POST /api/v1/locations/import): a
// dry run first shows what would change; a file with any bad row changes
// nothing, and every bad row is listed with its line.
function importCard() {
  const out = h('div', { class: 'import-result', 'aria-live': 'polite' });
  const file = h('input', { type: 'file', accept: '.csv,text/csv', 'aria-label': 'Read a CSV file' });
  let form;
  const send = async (dry) => {
    const v = form.values();
    if (!v.csv.trim()) { form.show('Paste a CSV file or choose one.', 'csv'); return; }
    const r = await request('POST', `/api/v1/locations/import${dry ? '?dry=1' : ''}`, v.csv, { type: 'text/csv' });
    out.replaceChildren(importResult(r.data || {}, dry));
    announce(dry ? 'Dry run done' : 'Import done');
  };
  form = new Form([
    { name: 'csv', label: 'CSV', type: 'textarea', code: true, rows: 6, wide: true, required: true,
      placeholder: 'serial,building,room,rack,unit,height,asset\nCZJ0001,B1,hall-2,R12,10,1,A-3301',
      help: 'A header is required. Rows name a machine by id, serial, mac or node_name; racks are made on first use.' },
  ], {
    confirm: 'Import',
    extra: [file, h('button', { type: 'button', id: 'import-dry', onclick: () => runDry() }, 'Dry run')],
    submit: async () => send(false),
  });
  const runDry = async () => {
    form.clearErrors();
    try { await send(true); } catch (e) { failed(e); }
  };
  const failed = (e) => {
    const rows = e.body?.errors || [];
    form.show(e.message, rows.length ? null : 'csv');
    if (rows.length) {
      out.replaceChildren(h('div', { class: 'alert error', role: 'alert', id: 'import-errors' },
        h('p', {}, h('strong', {}, `${rows.length === 1 ? 'One bad row' : `${rows.length} bad rows`}: nothing was changed.`)),
        h('ul', {}, rows.map((x) => h('li', {}, `line ${x.line}: ${x.error}`)))));
    }
  };
  // The form shows a refusal; the rows go below it.
  const submit = form.submit;
  form.submit = async (v, f) => { try { return await submit(v, f); } catch (e) { failed(e); return undefined; } };
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (f) form.field('csv').input.value = await f.text();
  });
  const card = section('Import locations (CSV)', form.el, out);
  card.id = 'import';
  return card;
}

function importResult(r, dry) {
  const changes = r.changes || [];
  const head = dry
    ? `Dry run: ${changes.length} machine${changes.length === 1 ? '' : 's'} would move${r.unchanged ? `, ${r.unchanged} unchanged` : ''}. Nothing was changed.`
    : `${r.applied ? 'Imported' : 'Nothing to change'}: ${changes.length} machine${changes.length === 1 ? '' : 's'} moved${r.unchanged ? `, ${r.unchanged} unchanged` : ''}.`;
  return h('div', { id: 'import-changes' },
    h('p', {}, h('strong', {}, head), (r.new_racks || []).length ? ` New racks: ${r.new_racks.join(', ')}.` : ''),
    changes.length ? table('Location changes', [
      { label: 'Line', get: (c) => String(c.line), cls: 'num' },
      { label: 'Machine', get: (c) => h('a', { href: `#/machines/${enc(c.machine)}` }, c.machine) },
      { label: 'Matched by', get: (c) => c.matched_by },
      { label: 'From', get: (c) => placeText(c.from) || '—' },
      { label: 'To', get: (c) => placeText(c.to) || '—' },
    ], changes) : null);
}
