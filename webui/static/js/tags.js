// Tags: a name, an optional match rule (a Go template over .Node that
// prints true or false), a cloud-config fragment, overlays, a layout and a
// comment. Saving a rule recomputes every machine's tags on the nodes; the
// answer lists the machines the rule failed on, which this page shows.

import { get, post, put, del, watch, enc, hasRoute, machines as liveMachines } from './api.js';
import { h, section, table, empty, num, errorBox, stateBadge } from './dom.js';
import { Form, formDialog, confirmDelete, split } from './forms.js';

export function mount(main, route) {
  const name = route.parts[1];
  return name ? tagPage(main, name) : listPage(main);
}

const listOf = (d, key) => (Array.isArray(d) ? d : (d && d[key]) || []);
const count = (x) => (Array.isArray(x) ? x.length : Number(x || 0));

// Failures of the last save, kept for the tag's page the dialog opens.
const lastFailures = new Map();

async function layoutOptions() {
  if (!(await hasRoute('GET', '/api/v1/layouts'))) return null;
  try {
    const d = (await get('/api/v1/layouts')).data;
    return [['', '(none)'], ...listOf(d, 'layouts').map((l) => [l.name, l.name])];
  } catch {
    return null; // no layouts route: a text field instead
  }
}

function tagFields(t, layouts, editing) {
  return [
    { name: 'name', label: 'Name', value: t.name || '', required: true, readonly: editing, help: 'A DNS label: tag:NAME stands wherever a machine can be named.' },
    { name: 'match', label: 'Match rule', type: 'textarea', rows: 3, code: true, value: t.match || '', wide: true,
      help: 'A Go template over .Node that prints true or false, e.g. {{ gt (len .Node.GPUs) 0 }}. Empty: a manual tag.', match: [/\b(match|rule|template)\b/i] },
    { name: 'cloud_config', label: 'Cloud-config fragment', type: 'textarea', rows: 6, code: true, value: t.cloud_config || '', wide: true,
      help: 'A #cloud-config document or a #! script, added to a deployment\'s user-data.', match: [/\bcloud[- _]?config\b/i, /\bfragment\b/i] },
    layouts
      ? { name: 'layout', label: 'Interface layout', type: 'select', value: t.layout || '', options: layouts.some(([v]) => v === (t.layout || '')) ? layouts : [...layouts, [t.layout, t.layout]] }
      : { name: 'layout', label: 'Interface layout', value: t.layout || '', help: 'The name of a layout.' },
    { name: 'overlays', label: 'Overlays', value: (t.overlays || []).join(', '), help: 'For stateless nodes: names separated by commas.', match: /\boverlays?\b/i },
    { name: 'comment', label: 'Comment', value: t.comment || '' },
  ];
}

const body = (v) => ({ name: v.name.trim(), match: v.match, cloud_config: v.cloud_config, layout: v.layout, overlays: split(v.overlays), comment: v.comment });

function listPage(main) {
  const ctrl = new AbortController();
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(
    h('div', { class: 'page-head with-buttons' }, h('h1', {}, 'Tags'),
      h('button', { type: 'button', id: 'add-tag', onclick: () => addTag() }, 'Add tag…')),
    h('p', { class: 'muted' }, 'A tag with a match rule follows the rule: it is recomputed at every commissioning and whenever the tag is saved. A tag without one is given by hand (a machine\'s Tags…).'),
    section('Tags', box));
  watch('/api/v1/tags', (d) => {
    const list = listOf(d, 'tags');
    box.replaceChildren(list.length ? table('Tags', [
      { label: 'Tag', get: (t) => h('a', { href: `#/tags/${enc(t.name)}` }, t.name) },
      { label: 'Kind', get: (t) => (t.match ? h('span', { class: 'badge ok' }, 'rule') : h('span', { class: 'badge' }, 'manual')) },
      { label: 'Match rule', get: (t) => (t.match ? h('code', { class: 'clip' }, t.match) : '—') },
      { label: 'Layout', get: (t) => (t.layout ? h('a', { href: `#/layouts/${enc(t.layout)}` }, t.layout) : '—') },
      { label: 'Cloud-config', get: (t) => (t.cloud_config ? `${t.cloud_config.split('\n').length} lines` : '—') },
      { label: 'Machines', get: (t) => num(count(t.machines)), cls: 'num' },
      { label: 'Comment', get: (t) => t.comment || '—' },
    ], list) : empty('No tags yet.'));
  }, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); } });
  return () => ctrl.abort();
}

async function addTag() {
  const layouts = await layoutOptions();
  const out = await formDialog({
    title: 'Add a tag',
    fields: tagFields({}, layouts, false),
    confirm: 'Add tag',
    wide: true,
    submit: async (v) => ({ name: v.name.trim(), ...((await post('/api/v1/tags', body(v))).data || {}) }),
  });
  if (!out) return;
  lastFailures.set(out.name, out.failures || []);
  location.hash = `#/tags/${enc(out.name)}`;
}

function failuresBox(failures, names) {
  if (!failures || !failures.length) return null;
  return h('div', { class: 'alert error', role: 'alert', id: 'tag-failures' },
    h('p', {}, h('strong', {}, `The rule failed on ${failures.length === 1 ? 'one machine' : `${failures.length} machines`}`),
      ': their tags were left as they were.'),
    h('ul', {}, failures.map((f) => h('li', {}, h('a', { href: `#/machines/${enc(f.machine)}` }, names.get(f.machine) || f.machine), `: ${f.error}`))));
}

function tagPage(main, name) {
  const ctrl = new AbortController();
  const head = h('div', { class: 'page-head' },
    h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/tags' }, 'Tags'), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, name)),
    h('h1', {}, `Tag ${name}`));
  const formBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const failBox = h('div', {});
  const machinesBox = h('div', {});
  main.append(head, failBox, section('Definition', formBox), section('Machines with this tag', machinesBox));
  let names = new Map();
  let failures = lastFailures.get(name) || null;
  lastFailures.delete(name);
  const drawFailures = () => failBox.replaceChildren(failuresBox(failures, names) || '');

  async function load() {
    try {
      const [t, layouts] = await Promise.all([get(`/api/v1/tags/${enc(name)}`, { signal: ctrl.signal }), layoutOptions()]);
      const form = new Form(tagFields(t.data, layouts, true), {
        confirm: 'Save tag',
        extra: [h('button', { type: 'button', class: 'danger-text', id: 'delete-tag', onclick: () => remove() }, 'Delete tag…')],
        submit: async (v) => {
          const r = await put(`/api/v1/tags/${enc(name)}`, body(v));
          failures = r.data?.failures || [];
          drawFailures();
          form.status.hidden = false;
          form.status.className = 'alert form-ok';
          form.status.replaceChildren(h('p', {}, failures.length ? 'Saved, with failures (above).' : 'Saved.'));
          return r.data;
        },
      });
      formBox.replaceChildren(form.el);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) {
        formBox.replaceChildren(h('div', { class: 'alert', role: 'alert' }, h('p', {}, `There is no tag ${name}. `, h('a', { href: '#/tags' }, 'Back to the tags.'))));
        return;
      }
      formBox.replaceChildren(errorBox(e));
    }
  }

  async function remove() {
    const ok = await confirmDelete(`tag ${name}`, 'Machines lose it, and its cloud-config no longer reaches their deployments.',
      async () => (await del(`/api/v1/tags/${enc(name)}`)).data || {});
    if (ok) location.hash = '#/tags';
  }

  load();
  drawFailures();
  const unsubscribe = liveMachines.subscribe((d) => {
    if (!d) return;
    const ms = d.machines || [];
    names = new Map(ms.map((m) => [m.id, m.name || m.id]));
    const tagged = ms.filter((m) => (m.tags || []).includes(name) || (m.auto_tags || []).includes(name));
    machinesBox.replaceChildren(tagged.length ? table(`Machines tagged ${name}`, [
      { label: 'Machine', get: (m) => h('a', { href: `#/machines/${enc(m.id)}` }, m.name || m.id) },
      { label: 'State', get: (m) => stateBadge(m.state) },
      { label: 'How', get: (m) => ((m.auto_tags || []).includes(name) ? 'match rule' : 'by hand') },
    ], tagged) : empty('No machine has this tag.'));
    drawFailures();
  });
  return () => { ctrl.abort(); unsubscribe(); };
}
