// A machine's network section: the interface layout it uses, addresses
// pinned to its interfaces, and a preview of the plan the node resolves
// against its inventory (GET …/network-plan): the NICs each selector chose
// and why, the addresses it would allocate, and the rendered
// network-config and udev rules. Nothing is allocated by a preview.

import { get, put, enc, hasRoute } from './api.js';
import { h, section, table, empty, errorBox, id as newId } from './dom.js';
import { Form, FieldError } from './forms.js';

const listOf = (d, key) => (Array.isArray(d) ? d : (d && d[key]) || []);

// settingsOf finds the machine's layout and pins in its record, however the
// answer nests them.
function settingsOf(m) {
  const n = m.network || {};
  return { layout: n.layout ?? m.layout ?? '', static: n.static ?? m.static ?? {} };
}

export function networkCard(ref) {
  const path = `/api/v1/machines/${enc(ref)}`;
  const formBox = h('div', {});
  const planBox = h('div', { class: 'plan', 'aria-live': 'polite' });
  const preview = h('button', { type: 'button', id: 'preview-plan', onclick: () => showPlan() }, 'Preview plan');
  const el = section('Network', formBox, planBox);
  el.id = 'network';
  let key = null;
  let layouts = null;

  async function build(m) {
    if (!(await hasRoute('PUT', '/api/v1/machines/{id}/network'))) {
      formBox.replaceChildren(empty('This node cannot set a machine\'s layout yet (no network routes): it runs an older version.'));
      return;
    }
    if (layouts === null) {
      try {
        layouts = listOf((await get('/api/v1/layouts')).data, 'layouts').map((l) => l.name);
      } catch {
        layouts = false; // no layouts route on this node
      }
    }
    const cur = settingsOf(m);
    const opts = [['', '(none: the boot NIC gets an address)'], ...(layouts || []).map((n) => [n, n])];
    if (cur.layout && !opts.some(([v]) => v === cur.layout)) opts.push([cur.layout, cur.layout]);
    const form = new Form([
      layouts === false
        ? { name: 'layout', label: 'Layout', value: cur.layout, help: 'The name of a layout.' }
        : { name: 'layout', label: 'Layout', type: 'select', value: cur.layout, options: opts, help: 'Set here, it wins over a tag\'s layout.' },
      { name: 'static', label: 'Pinned addresses', type: 'textarea', rows: 3, code: true,
        value: Object.entries(cur.static || {}).map(([i, a]) => `${i}=${a}`).join('\n'),
        help: 'One IFACE=ADDRESS a line (bond0.200=10.20.0.15): a static address for that interface of the layout.',
        match: [/\b(static|pin|pinned|address)\b/i] },
    ], {
      confirm: 'Save network',
      extra: [preview],
      submit: async (v) => {
        const pins = {};
        for (const line of v.static.split('\n').map((x) => x.trim()).filter(Boolean)) {
          const i = line.indexOf('=');
          if (i <= 0) throw new FieldError('static', `"${line}" is not IFACE=ADDRESS`);
          pins[line.slice(0, i).trim()] = line.slice(i + 1).trim();
        }
        const r = await put(`${path}/network`, { layout: v.layout, static: pins });
        form.status.className = 'alert form-ok';
        form.status.hidden = false;
        form.status.replaceChildren(h('p', {}, 'Saved. Preview the plan to see what a deployment would configure.'));
        return r.data;
      },
    });
    formBox.replaceChildren(form.el);
  }

  async function showPlan() {
    planBox.replaceChildren(h('p', { class: 'muted' }, 'Resolving…'));
    try {
      const r = await get(`${path}/network-plan`);
      planBox.replaceChildren(renderPlan(r.data || {}));
    } catch (e) {
      planBox.replaceChildren(h('div', { class: 'alert error', role: 'alert' },
        h('p', {}, h('strong', {}, 'The plan cannot be resolved: '), e.message)));
    }
  }

  return {
    el,
    // update rebuilds the form only when the machine's settings changed, so
    // a live update never throws away what the operator is typing.
    update(m) {
      const k = JSON.stringify(settingsOf(m));
      if (k === key) return;
      key = k;
      build(m).catch((e) => formBox.replaceChildren(errorBox(e)));
    },
  };
}

const pick = (o, ...names) => { for (const n of names) if (o[n] !== undefined) return o[n]; return undefined; };

// renderPlan shows what the node answers: the choices, the addresses, the
// notes and the rendered files; any other part as JSON.
export function renderPlan(p) {
  const out = [];
  const choices = pick(p, 'choices', 'Choices') || [];
  const addrs = pick(p, 'addresses', 'Addresses') || [];
  const notes = pick(p, 'notes', 'Notes') || [];
  const config = pick(p, 'network_config', 'networkConfig', 'cloud_init');
  const udev = pick(p, 'udev', 'udev_rules');
  const layout = pick(p, 'layout', 'Layout');
  out.push(h('p', {}, layout ? `Layout ${layout}.` : 'No layout: the default plan.'));
  if (notes.length) out.push(h('ul', { class: 'notes' }, notes.map((n) => h('li', {}, n))));
  out.push(h('h3', {}, 'NICs chosen'), choices.length ? table('NICs the selectors chose', [
    { label: 'Interface', get: (c) => pick(c, 'interface', 'Interface') },
    { label: 'Selector', get: (c) => h('code', {}, pick(c, 'selector', 'Selector') || '') },
    { label: 'NIC', get: (c) => pick(c, 'nic', 'NIC') },
    { label: 'MAC / GUID', get: (c) => h('code', {}, pick(c, 'mac', 'MAC') || '') },
    { label: 'Why', get: (c) => pick(c, 'reason', 'Reason') },
  ], choices) : empty('No NIC chosen.'));
  out.push(h('h3', {}, 'Addresses'), addrs.length ? table('Addresses the plan gives', [
    { label: 'Interface', get: (a) => pick(a, 'interface', 'Interface') },
    { label: 'Address', get: (a) => pick(a, 'ip', 'IP') },
    { label: 'Subnet', get: (a) => pick(a, 'subnet', 'Subnet') },
    { label: 'How', get: (a) => pick(a, 'how', 'How') },
    { label: 'Held', get: (a) => (pick(a, 'held', 'Held') ? 'already held' : 'to claim') },
    { label: 'Why', get: (a) => pick(a, 'reason', 'Reason') },
  ], addrs) : empty('No address to allocate.'));
  if (config) out.push(file('network-config (cloud-init v2)', config));
  if (udev) out.push(file('udev rules', udev));
  const known = new Set(['choices', 'Choices', 'addresses', 'Addresses', 'notes', 'Notes', 'network_config', 'networkConfig', 'cloud_init', 'udev', 'udev_rules', 'layout', 'Layout', 'machine', 'Machine']);
  const rest = Object.fromEntries(Object.entries(p).filter(([k]) => !known.has(k)));
  if (Object.keys(rest).length) out.push(h('details', {}, h('summary', {}, 'The rest of the answer'), h('pre', { class: 'code' }, JSON.stringify(rest, null, 2))));
  return h('div', { id: 'plan' }, out);
}

function file(title, text) {
  const hid = newId('file');
  return h('figure', { class: 'file', 'aria-labelledby': hid }, h('figcaption', { id: hid }, title), h('pre', { class: 'code', tabindex: '0' }, typeof text === 'string' ? text : JSON.stringify(text, null, 2)));
}
