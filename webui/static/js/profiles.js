// Stateless profiles and overlays. A profile names a boot image, the
// overlays applied over it, kernel arguments, the pool node names come
// from (node%03d, 1 to 999), the subnets addresses come from and the
// templates' variables; the page adds, edits (a PUT of the whole) and
// deletes them. Overlays are imported with rollcall overlay import: the
// page lists them and shows each one's files.

import { get, post, put, del, watch, enc } from './api.js';
import { h, section, table, empty, num, bytes, when, ago, errorBox } from './dom.js';
import { Form, formDialog, confirmDelete, split, FieldError } from './forms.js';
import { followNodes, heartbeatText } from './stateless.js';

export function mount(main, route) {
  const [first, name] = route.parts;
  if (first === 'overlays' && name) return overlayPage(main, name);
  return name ? profilePage(main, name) : listPage(main);
}

const dash = (s) => s || '—';
const names = (xs) => (xs || []).join(', ');

// pool is a profile's name pool in a few words: cn%02d (1–99).
export function pool(p) {
  return `${p.name_format} (${p.name_first}–${p.name_last})`;
}

async function imageOptions() {
  try {
    const list = (await get('/api/v1/images')).data?.images || [];
    return list.map((im) => [im.name, `${im.name}${(im.files || []).some((f) => f.name === 'squashfs') ? '' : ' (no squashfs)'}`]);
  } catch {
    return null; // a text field instead
  }
}

async function overlayNames() {
  try {
    return ((await get('/api/v1/overlays')).data?.overlays || []).map((o) => o.name);
  } catch {
    return [];
  }
}

// varsText and parseVars turn the variables into KEY=VALUE lines and back.
const varsText = (vars) => Object.entries(vars || {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${v}`).join('\n');

function parseVars(text) {
  const out = {};
  const lines = String(text || '').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new FieldError('vars', `Line ${i + 1} (“${line}”) is not KEY=VALUE.`);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return out;
}

function profileFields(p, images, overlays, editing) {
  const image = images && images.length
    ? { name: 'image', label: 'Image', type: 'select', value: p.image || images[0][0], required: true,
      options: images.some(([v]) => v === p.image) || !p.image ? images : [...images, [p.image, p.image]],
      help: 'A boot image with a kernel, an initrd and a squashfs (rollcall image import).' }
    : { name: 'image', label: 'Image', value: p.image || '', required: true, help: 'The name of a boot image with a kernel, an initrd and a squashfs.' };
  return [
    { name: 'name', label: 'Name', value: p.name || '', required: true, readonly: editing, match: /\bprofile name\b/i,
      help: 'Lowercase letters, digits, ".", "_" or "-".' },
    image,
    { name: 'overlays', label: 'Overlays', value: names(p.overlays), match: /\boverlays?\b/i,
      help: `Applied in this order, then the node's tags' overlays; separated by commas. ${overlays.length ? `There are: ${overlays.join(', ')}.` : 'There are none yet (rollcall overlay import NAME DIR).'}` },
    { name: 'args', label: 'Kernel arguments', value: p.args || '', match: /\bkernel arguments?\b/i,
      help: 'Added to the node\'s kernel command line; the rollcall.* arguments are the appliance\'s own.' },
    { name: 'name_format', label: 'Node name format', value: p.name_format || '', placeholder: 'node%03d', match: /\bname format\b/i,
      help: 'One %d for the node\'s number: node%03d makes node001, node002, …' },
    { name: 'name_first', label: 'First number', type: 'number', min: 0, value: p.name_first ?? '', placeholder: '1', match: /\bname pool\b/i },
    { name: 'name_last', label: 'Last number', type: 'number', min: 0, value: p.name_last ?? '', placeholder: '999' },
    { name: 'subnets', label: 'Subnets', value: names(p.subnets), match: /\bsubnets?\b/i,
      help: 'The subnets (CIDR) a node\'s addresses come from, separated by commas; none: the node has no address from the appliance.' },
    { name: 'vars', label: 'Variables', type: 'textarea', rows: 4, code: true, wide: true, value: varsText(p.vars), match: /\bvariables?\b/i,
      help: 'KEY=VALUE, one a line: the templates\' .Vars, over the cluster\'s.' },
  ];
}

function body(v) {
  const out = { image: v.image.trim(), overlays: split(v.overlays), args: v.args.trim() || undefined, name_format: v.name_format.trim() || undefined,
    name_first: v.name_first, name_last: v.name_last, subnets: split(v.subnets), vars: parseVars(v.vars) };
  if (!out.subnets.length) delete out.subnets;
  if (!Object.keys(out.vars).length) delete out.vars;
  return out;
}

function listPage(main) {
  const ctrl = new AbortController();
  const profBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const ovBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(
    h('div', { class: 'page-head with-buttons' }, h('h1', {}, 'Profiles'),
      h('button', { type: 'button', id: 'add-profile', onclick: () => addProfile() }, 'Add profile…')),
    h('p', { class: 'muted' }, 'A machine assigned to a profile boots its image into memory, with the overlays rendered for it: a stateless node. Assign a ready machine from the machines list (Assign profile…).'),
    section('Profiles', profBox),
    section('Overlays', h('p', { class: 'muted' }, 'Trees of files (system/ at boot, runtime/ every few minutes; .tmpl files are templates rendered per node). Import one with ',
      h('code', {}, 'rollcall overlay import NAME DIR'), '.'), ovBox));
  const onError = (box) => (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); };
  // The counts follow the nodes and the profiles as they change: a
  // profile's nodes from the node list, an overlay's profiles from the
  // profile list.
  let profiles = null;
  let overlays = null;
  let nodes = null;
  const nodesOf = (p) => (nodes ? [...nodes.values()].filter((n) => n.profile === p.name).length : p.nodes);
  const usersOf = (o) => (profiles ? profiles.filter((p) => (p.overlays || []).includes(o.name)).map((p) => p.name) : o.profiles);
  function drawProfiles() {
    if (!profiles) return;
    profBox.replaceChildren(profiles.length ? table('Profiles', [
      { label: 'Profile', get: (p) => h('a', { href: `#/profiles/${enc(p.name)}` }, p.name) },
      { label: 'Image', get: (p) => p.image },
      { label: 'Overlays', get: (p) => ((p.overlays || []).length ? h('span', { class: 'chips' },
        p.overlays.map((o) => h('a', { class: 'chip', href: `#/overlays/${enc(o)}` }, o))) : '—') },
      { label: 'Name format', get: (p) => h('code', {}, pool(p)) },
      { label: 'Subnets', get: (p) => dash(names(p.subnets)) },
      { label: 'Nodes', get: (p) => num(nodesOf(p)), cls: 'num' },
    ], profiles, { cls: 'profiles' }) : empty('No profiles yet.'));
  }
  function drawOverlays() {
    if (!overlays) return;
    ovBox.replaceChildren(overlays.length ? table('Overlays', [
      { label: 'Overlay', get: (o) => h('a', { href: `#/overlays/${enc(o.name)}` }, o.name) },
      { label: 'Files', get: (o) => num(o.file_count), cls: 'num' },
      { label: 'Templates', get: (o) => num(o.templates), cls: 'num' },
      { label: 'Size', get: (o) => bytes(o.size), cls: 'num' },
      { label: 'Updated', get: (o) => ago(o.updated) },
      { label: 'Profiles', get: (o) => dash(names(usersOf(o))) },
    ], overlays, { cls: 'overlays' }) : empty('No overlays yet.'));
  }
  watch('/api/v1/profiles', (d) => { profiles = d.profiles || []; drawProfiles(); drawOverlays(); },
    { signal: ctrl.signal, onError: onError(profBox) });
  watch('/api/v1/overlays', (d) => { overlays = d.overlays || []; drawOverlays(); },
    { signal: ctrl.signal, onError: onError(ovBox) });
  const stop = followNodes((m) => { nodes = m; drawProfiles(); });
  return () => { ctrl.abort(); stop(); };
}

async function addProfile() {
  const [images, overlays] = await Promise.all([imageOptions(), overlayNames()]);
  const out = await formDialog({
    title: 'Add a profile',
    fields: profileFields({}, images, overlays, false),
    confirm: 'Add profile',
    wide: true,
    submit: async (v) => (await post(`/api/v1/profiles/${enc(v.name.trim())}`, body(v))).data,
  });
  if (out && out.name) location.hash = `#/profiles/${enc(out.name)}`;
}

function crumbs(parent, href, name) {
  return h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href }, parent), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, name));
}

function profilePage(main, name) {
  const ctrl = new AbortController();
  const formBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const nodesBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, crumbs('Profiles', '#/profiles', name), h('h1', {}, `Profile ${name}`)),
    section('Definition', formBox), section('Nodes', nodesBox));

  async function load() {
    try {
      const [p, images, overlays] = await Promise.all([get(`/api/v1/profiles/${enc(name)}`, { signal: ctrl.signal }), imageOptions(), overlayNames()]);
      const form = new Form(profileFields(p.data, images, overlays, true), {
        confirm: 'Save profile',
        extra: [h('button', { type: 'button', class: 'danger-text', id: 'delete-profile', onclick: () => remove() }, 'Delete profile…')],
        submit: async (v) => {
          const r = await put(`/api/v1/profiles/${enc(name)}`, body(v));
          form.status.hidden = false;
          form.status.className = 'alert form-ok';
          form.status.replaceChildren(h('p', {}, 'Saved. Assigned nodes get the change at their next refresh; a new image or kernel arguments at their next boot.'));
          return r.data;
        },
      });
      formBox.replaceChildren(form.el);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) {
        formBox.replaceChildren(h('div', { class: 'alert', role: 'alert' }, h('p', {}, `There is no profile ${name}. `, h('a', { href: '#/profiles' }, 'Back to the profiles.'))));
        return;
      }
      formBox.replaceChildren(errorBox(e));
    }
  }

  async function remove() {
    const ok = await confirmDelete(`profile ${name}`, 'A profile machines are assigned to is refused: unassign them first.',
      async () => (await del(`/api/v1/profiles/${enc(name)}`)).data || {});
    if (ok) location.hash = '#/profiles';
  }

  load();
  const stop = followNodes((nodes) => {
    const mine = [...nodes.values()].filter((n) => n.profile === name).sort((a, b) => a.number - b.number);
    nodesBox.replaceChildren(mine.length ? table(`Nodes of ${name}`, [
      { label: 'Node', get: (n) => h('a', { href: `#/machines/${enc(n.machine)}` }, n.name) },
      { label: 'Addresses', get: (n) => dash(names(n.addresses)) },
      { label: 'Heartbeat', get: (n) => h('span', {}, heartbeatText(n), n.stale ? [' ', h('span', { class: 'badge bad stale' }, 'stale')] : null) },
      { label: 'Assigned', get: (n) => when(n.assigned) },
    ], mine) : empty('No machine is assigned to this profile.'));
  });
  return () => { ctrl.abort(); stop(); };
}

function overlayPage(main, name) {
  const ctrl = new AbortController();
  const box = h('div', { class: 'stack' }, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, crumbs('Profiles', '#/profiles', `overlay ${name}`), h('h1', {}, `Overlay ${name}`)), box);
  const draw = (o) => {
    const files = o.files || [];
    box.replaceChildren(
      section('Overlay', h('p', {}, `${num(o.file_count)} files, ${num(o.templates)} templates, ${bytes(o.size)}; updated ${when(o.updated)}. `,
        (o.profiles || []).length ? ['Named by ', o.profiles.map((p, i) => [i ? ', ' : '', h('a', { href: `#/profiles/${enc(p)}` }, p)]), '.'] : 'No profile names it.'),
      h('p', { class: 'muted' }, 'Change it with ', h('code', {}, `rollcall overlay import ${name} DIR`), '.')),
      section('Files', files.length ? table(`Files of ${name}`, [
        { label: 'Path', get: (f) => h('code', {}, f.path) },
        { label: 'Kind', get: (f) => (f.path.endsWith('.tmpl') ? h('span', { class: 'badge ok' }, 'template') : h('span', { class: 'badge' }, 'file')) },
        { label: 'Tree', get: (f) => f.path.split('/')[0] },
        { label: 'Mode', get: (f) => h('code', {}, (f.mode || 0o644).toString(8).padStart(4, '0')) },
        { label: 'Size', get: (f) => bytes(f.size), cls: 'num' },
        { label: 'SHA-256', get: (f) => (f.sha256 ? h('code', { title: f.sha256 }, `${f.sha256.slice(0, 12)}…`) : '—') },
      ], files, { cls: 'overlay-files' }) : empty('The overlay has no files.')));
  };
  // The overlay itself answers no blocking query: the list does, and a
  // change to it reads the overlay again.
  const load = async () => {
    try {
      draw((await get(`/api/v1/overlays/${enc(name)}`, { signal: ctrl.signal })).data);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) {
        box.replaceChildren(h('div', { class: 'alert', role: 'alert' }, h('p', {}, `There is no overlay ${name}. `, h('a', { href: '#/profiles' }, 'Back to the profiles.'))));
      } else if (e.status !== 401) box.replaceChildren(errorBox(e));
    }
  };
  watch('/api/v1/overlays', load, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); } });
  return () => ctrl.abort();
}
