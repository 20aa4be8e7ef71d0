// Interface layouts: named JSON documents (physical, bond, vlan
// interfaces; NICs chosen by selectors; links naming subnets) that a
// machine or a tag uses. Listed, edited as JSON (checked to parse before it
// is sent; the node checks the rest) and deleted.

import { get, request, del, watch, enc, hasRoute } from './api.js';
import { h, section, table, empty, errorBox, when } from './dom.js';
import { Form, FieldError, formDialog, confirmDelete } from './forms.js';

export function mount(main, route) {
  const name = route.parts[1];
  return name ? layoutPage(main, name) : listPage(main);
}

const listOf = (d, key) => (Array.isArray(d) ? d : (d && d[key]) || []);

// docOf is a layout's file as it was saved (the answer's json).
export function docOf(l) {
  if (!l) return '';
  if (typeof l.json === 'string') return l.json;
  if (l.layout && typeof l.layout === 'object') return JSON.stringify(l.layout, null, 2);
  return '';
}

// save sends the file as typed (the node reads it strictly and says what
// is wrong with it), the comment in the query.
function save(method, name, v) {
  parsed(v.json);
  const q = v.comment ? `?comment=${enc(v.comment)}` : '';
  return request(method, `/api/v1/layouts/${enc(name)}${q}`, v.json, { type: 'application/json' });
}

const EXAMPLE = JSON.stringify({
  interfaces: [
    { type: 'physical', name: 'boot', select: 'boot', links: [{ subnet: 'boot', mode: 'auto', default_gateway: true }] },
    { type: 'bond', name: 'bond0', members: ['fastest:2'], mtu: 9000 },
    { type: 'vlan', name: 'bond0.200', parent: 'bond0', vid: 200, links: [{ subnet: 'storage', mode: 'auto' }] },
  ],
}, null, 2);

// parsed checks the document parses, and says where it does not.
function parsed(text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new FieldError('json', `The layout is not valid JSON: ${e.message}`);
  }
}

function fields(l, editing) {
  return [
    { name: 'name', label: 'Name', value: l.name || '', required: true, readonly: editing },
    { name: 'json', label: 'Layout (JSON)', type: 'textarea', code: true, rows: 18, value: docOf(l) || (editing ? '' : EXAMPLE), wide: true, required: true,
      help: 'Interfaces of type physical, bond (802.3ad unless said) or vlan; selectors boot, name:X, mac:X, fastest:N, ib:N, all; links with a subnet (CIDR, name or boot) and a mode: auto, static, dhcp or link_up.',
      match: [/\b(interfaces?|selector|select|bond|vlan|link|subnet|mode|members?|parent|json|layout)\b/i] },
    { name: 'comment', label: 'Comment', value: l.comment || '' },
  ];
}

function listPage(main) {
  const ctrl = new AbortController();
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(
    h('div', { class: 'page-head with-buttons' }, h('h1', {}, 'Layouts'),
      h('button', { type: 'button', id: 'add-layout', onclick: () => addLayout() }, 'Add layout…')),
    h('p', { class: 'muted' }, 'How a deployed machine\'s interfaces are set up. A machine uses the layout set on it (its Network section) or its tag\'s; without one, the boot NIC gets an address.'),
    section('Layouts', box));
  hasRoute('GET', '/api/v1/layouts').then((ok) => {
    if (ok) follow();
    else box.replaceChildren(empty('This node has no layouts routes yet: it runs an older version.'));
  });
  const follow = () => watch('/api/v1/layouts', (d) => {
    const list = listOf(d, 'layouts');
    box.replaceChildren(list.length ? table('Layouts', [
      { label: 'Layout', get: (l) => h('a', { href: `#/layouts/${enc(l.name)}` }, l.name) },
      { label: 'Interfaces', get: (l) => { try { return String(JSON.parse(docOf(l)).interfaces.length); } catch { return '—'; } }, cls: 'num' },
      { label: 'Comment', get: (l) => l.comment || '—' },
      { label: 'Created', get: (l) => when(l.created) },
    ], list) : empty('No layouts yet.'));
  }, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); } });
  return () => ctrl.abort();
}

async function addLayout() {
  const out = await formDialog({
    title: 'Add a layout',
    fields: fields({}, false),
    confirm: 'Add layout',
    wide: true,
    submit: async (v) => {
      await save('POST', v.name.trim(), v);
      return { name: v.name.trim() };
    },
  });
  if (out) location.hash = `#/layouts/${enc(out.name)}`;
}

function layoutPage(main, name) {
  const ctrl = new AbortController();
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' },
    h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/layouts' }, 'Layouts'), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, name)),
    h('h1', {}, `Layout ${name}`)), section('Definition', box));
  (async () => {
    try {
      const l = (await get(`/api/v1/layouts/${enc(name)}`, { signal: ctrl.signal })).data;
      const form = new Form(fields(l, true), {
        confirm: 'Save layout',
        extra: [h('button', { type: 'button', class: 'danger-text', id: 'delete-layout', onclick: () => remove() }, 'Delete layout…')],
        submit: async (v) => {
          const r = await save('PUT', name, v);
          form.status.className = 'alert form-ok';
          form.status.hidden = false;
          form.status.replaceChildren(h('p', {}, 'Saved.'));
          return r.data;
        },
      });
      box.replaceChildren(form.el);
    } catch (e) {
      if (e.name === 'AbortError') return;
      box.replaceChildren(e.status === 404
        ? h('div', { class: 'alert', role: 'alert' }, h('p', {}, `There is no layout ${name}. `, h('a', { href: '#/layouts' }, 'Back to the layouts.')))
        : errorBox(e));
    }
  })();
  async function remove() {
    const ok = await confirmDelete(`layout ${name}`, 'A layout that a tag or a machine uses cannot be deleted.',
      async () => (await del(`/api/v1/layouts/${enc(name)}`)).data || {});
    if (ok) location.hash = '#/layouts';
  }
  return () => ctrl.abort();
}
