// A machine's network section: the interface layout it uses, addresses
// pinned to its interfaces, and a preview of the plan the node resolves
// against its inventory (GET …/network-plan): the NICs each selector chose
// and why, the addresses it would allocate, and the rendered
// network-config and udev rules. Nothing is allocated by a preview.

import { get, put, enc, hasRoute } from './api.js';
import { h, section, table, empty, errorBox, id as newId } from './dom.js';
import { Form, FieldError } from './forms.js';

const listOf = (d, key) => (Array.isArray(d) ? d : (d && d[key]) || []);

// settingsOf is the machine's own layout (the machine view carries it) and
// the pins this page last saved (the view does not carry them).
function settingsOf(m, pins) {
  return { layout: m.layout || '', static: pins };
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
  let pins = null; // as the last save answered; null: not known here
  let notice = null; // what the last save said, kept across a rebuild

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
    const cur = settingsOf(m, pins);
    const opts = [['', '(none: the boot NIC gets an address)'], ...(layouts || []).map((n) => [n, n])];
    if (cur.layout && !opts.some(([v]) => v === cur.layout)) opts.push([cur.layout, cur.layout]);
    const form = new Form([
      layouts === false
        ? { name: 'layout', label: 'Layout', value: cur.layout, help: 'The name of a layout.' }
        : { name: 'layout', label: 'Layout', type: 'select', value: cur.layout, options: opts, help: 'Set here, it wins over a tag\'s layout.' },
      { name: 'static', label: 'Pinned addresses', type: 'textarea', rows: 3, code: true,
        value: Object.entries(cur.static || {}).map(([i, a]) => `${i}=${a}`).join('\n'),
        help: cur.static ? 'One IFACE=ADDRESS a line (bond0.200=10.20.0.15; several addresses separated by commas). Empty releases them.'
          : 'One IFACE=ADDRESS a line (bond0.200=10.20.0.15). Pins on record are kept unless you type here: what you type replaces them.',
        match: [/\b(static|pin|pinned|address)\b/i] },
    ], {
      confirm: 'Save network',
      extra: [preview],
      submit: async (v) => {
        const out = {};
        for (const line of v.static.split('\n').map((x) => x.trim()).filter(Boolean)) {
          const i = line.indexOf('=');
          if (i <= 0) throw new FieldError('static', `"${line}" is not IFACE=ADDRESS`);
          out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
        }
        // Pins the page does not know are left as they are unless the
        // operator typed some (null keeps, {} releases).
        const typed = form.field('static').input.value !== form.field('static').spec.value;
        const r = await put(`${path}/network`, { layout: v.layout, static: typed || cur.static ? out : null });
        pinsKnown(r.data?.static);
        notice = r.data?.plan_error
          ? `Saved, but the machine has no plan with these settings: ${r.data.plan_error}`
          : 'Saved. Preview the plan to see what a deployment would configure.';
        say(form);
        return r.data;
      },
    });
    formBox.replaceChildren(form.el);
    say(form);
  }

  function say(form) {
    if (!notice) return;
    form.status.className = notice.startsWith('Saved, but') ? 'alert error form-error' : 'alert form-ok';
    form.status.hidden = false;
    form.status.replaceChildren(h('p', {}, notice));
  }

  function pinsKnown(p) {
    if (p) { pins = p; key = null; }
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
      const k = JSON.stringify(settingsOf(m, pins));
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
  const udev = pick(p, 'udev_rules', 'udev');
  const layout = pick(p, 'layout', 'Layout');
  const why = pick(p, 'why');
  out.push(h('p', {}, why || (layout ? `Layout ${layout}.` : 'No layout: the default plan.')));
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
    { label: 'Address', get: (a) => pick(a, 'address', 'ip', 'IP') },
    { label: 'Subnet', get: (a) => pick(a, 'subnet', 'Subnet') },
    { label: 'How', get: (a) => pick(a, 'how', 'How') },
    { label: 'Held', get: (a) => (pick(a, 'held', 'Held') ? 'already held' : 'to claim') },
    { label: 'Why', get: (a) => pick(a, 'reason', 'Reason') },
  ], addrs) : empty('No address to allocate.'));
  if (config) out.push(file('network-config (cloud-init v2)', config));
  if (udev) out.push(file(`udev rules${p.udev_rules_path ? ` (${p.udev_rules_path})` : ''}`, udev));
  const known = new Set(['choices', 'Choices', 'addresses', 'Addresses', 'notes', 'Notes', 'network_config', 'networkConfig', 'cloud_init', 'udev', 'udev_rules',
    'udev_rules_path', 'layout', 'Layout', 'machine', 'Machine', 'why', 'source', 'tag', 'index']);
  const rest = Object.fromEntries(Object.entries(p).filter(([k]) => !known.has(k)));
  if (Object.keys(rest).length) out.push(h('details', {}, h('summary', {}, 'The rest of the answer'), h('pre', { class: 'code' }, JSON.stringify(rest, null, 2))));
  return h('div', { id: 'plan' }, out);
}

function file(title, text) {
  const hid = newId('file');
  return h('figure', { class: 'file', 'aria-labelledby': hid }, h('figcaption', { id: hid }, title), h('pre', { class: 'code', tabindex: '0' }, typeof text === 'string' ? text : JSON.stringify(text, null, 2)));
}
