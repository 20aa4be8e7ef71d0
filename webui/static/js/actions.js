// Machine actions (power, boot device, re-commission, delete), the
// confirmation dialog, and the per-machine results panel. The machines table
// and the machine page both use them.

import { post, del, enc } from './api.js';
import { h, id as newId, announce } from './dom.js';

// ---- the dialog

// dialog shows a modal <dialog> and resolves with the form's values, or null
// when the operator cancels (Cancel, Escape). Focus returns to where it was.
export function dialog({ title, body = [], fields = [], confirm = 'OK', danger = false }) {
  const opener = document.activeElement;
  const tid = newId('dlg-title');
  const bid = newId('dlg-body');
  const form = h('form', { method: 'dialog' },
    h('h2', { id: tid }, title),
    h('div', { id: bid, class: 'dialog-body' }, body),
    fields.length ? h('div', { class: 'fields' }, fields.map(field)) : null,
    h('div', { class: 'buttons' },
      h('button', { type: 'submit', value: 'cancel', formnovalidate: true, autofocus: danger }, 'Cancel'),
      h('button', { type: 'submit', value: 'ok', class: danger ? 'danger' : 'primary', autofocus: !danger }, confirm)));
  const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': tid, 'aria-describedby': bid }, form);
  document.body.append(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      const ok = dlg.returnValue === 'ok';
      const values = {};
      if (ok) {
        for (const f of fields) {
          const el = form.elements.namedItem(f.name);
          values[f.name] = f.type === 'checkbox' ? el.checked : el.value;
        }
      }
      dlg.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(ok ? values : null);
    });
    dlg.showModal();
  });
}

function field(f) {
  const fid = newId('f');
  if (f.type === 'checkbox') {
    return h('div', { class: 'field check' },
      h('input', { type: 'checkbox', id: fid, name: f.name, checked: !!f.value }),
      h('label', { for: fid }, f.label),
      f.help ? h('p', { class: 'help' }, f.help) : null);
  }
  if (f.type === 'select') {
    return h('div', { class: 'field' },
      h('label', { for: fid }, f.label),
      h('select', { id: fid, name: f.name }, f.options.map(([v, text]) => h('option', { value: v, selected: v === f.value }, text))),
      f.help ? h('p', { class: 'help' }, f.help) : null);
  }
  if (f.type === 'textarea') {
    return h('div', { class: 'field' }, h('label', { for: fid }, f.label), h('textarea', { id: fid, name: f.name, rows: 3, spellcheck: 'false' }, f.value || ''));
  }
  return h('div', { class: 'field' }, h('label', { for: fid }, f.label), h('input', { id: fid, name: f.name, value: f.value || '' }));
}

// ---- the actions

const path = (m) => `/api/v1/machines/${enc(m.id)}`;

function jobOutcome(r) {
  if (r.status === 202) return { ok: true, text: `still running as job ${r.data?.id || ''}; see the machine's jobs` };
  const job = r.data || {};
  return { ok: true, text: job.result && job.result !== 'ok' ? job.result : 'done' };
}

const power = (action, label, opts = {}) => ({
  label,
  group: 'power',
  destructive: !!opts.destructive,
  // Switching many machines on at once is a power surge: confirm that too.
  confirmMany: true,
  describe: opts.describe,
  warn: opts.warn,
  run: async (m) => jobOutcome(await post(`${path(m)}/power`, { action })),
});

export const ACTIONS = {
  on: power('on', 'Power on', { describe: 'switch on' }),
  off: power('off', 'Power off', { destructive: true, describe: 'cut the power of',
    warn: 'Anything running stops at once, without a clean shutdown.' }),
  cycle: power('cycle', 'Power cycle', { destructive: true, describe: 'power-cycle',
    warn: 'Anything running stops at once, without a clean shutdown.' }),
  status: {
    label: 'Power status',
    group: 'power',
    run: async (m) => {
      const r = await post(`${path(m)}/power`, { action: 'status' });
      if (r.status === 202) return jobOutcome(r);
      return { ok: true, text: `power ${r.data?.result || 'unknown'}` };
    },
  },
  bootdev: {
    label: 'Boot device…',
    group: 'boot',
    fields: [
      { name: 'device', label: 'Boot device', type: 'select', value: 'pxe',
        options: [['pxe', 'Network (PXE)'], ['disk', 'Disk'], ['cdrom', 'CD/DVD'], ['bios', 'BIOS setup'], ['none', 'No override']] },
      { name: 'persistent', label: 'Keep for every boot', type: 'checkbox', help: 'Otherwise only the next boot uses it.' },
      { name: 'uefi', label: 'UEFI boot', type: 'checkbox', value: true },
    ],
    confirmLabel: 'Set boot device',
    run: async (m, v) => jobOutcome(await post(`${path(m)}/bootdev`, { device: v.device, persistent: v.persistent, uefi: v.uefi })),
  },
  tags: {
    label: 'Tags…',
    group: 'describe',
    fields: [
      { name: 'add', label: 'Add tags', help: 'Tag names, separated by spaces or commas. A tag that does not exist yet is refused: create it on the Tags page.' },
      { name: 'remove', label: 'Remove tags', help: 'Only tags given by hand can be removed; a rule\'s tags follow its rule.' },
    ],
    confirmLabel: 'Change tags',
    run: async (m, v) => {
      const r = await post(`${path(m)}/tags`, { add: words(v.add), remove: words(v.remove) });
      const tags = r.data?.tags;
      return { ok: true, text: tags ? (tags.length ? `tags ${tags.join(', ')}` : 'no tags') : 'done' };
    },
  },
  recommission: {
    label: 'Re-commission…',
    group: 'lifecycle',
    destructive: true,
    describe: 're-commission',
    detail: 'It goes back to state new and boots the commissioning image on its next network boot; the inventory is taken again.',
    warn: 'The current inventory is replaced when it commissions again.',
    fields: [
      { name: 'now', label: 'Now: set PXE and power-cycle through the BMC', type: 'checkbox',
        help: 'Without this, the machines re-commission the next time they network-boot.' },
    ],
    run: async (m, v) => {
      const r = await post(`${path(m)}/recommission${v.now ? '?now=1' : ''}`);
      if (v.now) return jobOutcome(r);
      return { ok: true, text: `state ${r.data?.state || 'new'}` };
    },
  },
  delete: {
    label: 'Delete…',
    group: 'lifecycle',
    destructive: true,
    describe: 'forget',
    detail: 'The record, inventory and history are removed. If the machine boots again, it is enlisted as a new one.',
    warn: 'This cannot be undone.',
    run: async (m) => { await del(path(m)); return { ok: true, text: 'deleted' }; },
  },
};

export const ACTION_ORDER = ['on', 'off', 'cycle', 'status', 'bootdev', 'tags', 'recommission', 'delete'];

const words = (s) => String(s || '').split(/[\s,]+/).filter(Boolean);

const nameOf = (m) => m.name || m.id;

function who(machines) {
  if (machines.length === 1) return `machine ${nameOf(machines[0])}`;
  return `${machines.length.toLocaleString('en')} machines`;
}

// ask confirms an action (or asks for its fields) and resolves with the
// values to run it with, or null.
// An action may build its fields when asked (prepare(machines) →
// {fields}) and confirm the values a second time (confirm(values,
// machines, prepared) → values or null).
export async function ask(key, machines) {
  const a = ACTIONS[key];
  let prep = {};
  if (a.prepare) {
    try {
      prep = await a.prepare(machines);
    } catch (e) {
      await dialog({ title: a.label.replace(/…$/, ''), body: [h('p', { class: 'warn' }, e.message)], confirm: 'Close' });
      return null;
    }
  }
  const values = await askFields(a, machines, prep.fields || a.fields);
  return values && a.confirm ? a.confirm(values, machines, prep) : values;
}

async function askFields(a, machines, fields) {
  const needs = fields || a.destructive || (a.confirmMany && machines.length > 1);
  if (!needs) return {};
  const one = machines.length === 1;
  const list = machines.slice(0, 5).map(nameOf).join(', ') + (machines.length > 5 ? `, and ${(machines.length - 5).toLocaleString('en')} more` : '');
  const target = one ? nameOf(machines[0]) : `${who(machines)}: ${list}`;
  const verb = a.label.replace(/…$/, '');
  return dialog({
    title: `${verb}: ${one ? nameOf(machines[0]) : who(machines)}`,
    body: [
      h('p', {}, a.describe ? `This will ${a.describe} ${target}.` : `For ${target}.`),
      a.detail ? h('p', {}, one ? a.detail : a.detail.replace(/^It goes/, 'They go').replace(/its next/, 'their next').replace(/^The record, inventory and history are/, 'Their records, inventories and histories are')) : null,
      a.warn ? h('p', { class: 'warn' }, a.warn) : null,
    ],
    fields: fields || [],
    confirm: a.confirmLabel || `${verb} ${machines.length > 1 ? `${machines.length.toLocaleString('en')} machines` : ''}`.trim(),
    danger: !!a.destructive,
  });
}

// ---- running and showing results

// Results is a panel listing one line per machine, updated as each answer
// arrives. Screen readers hear the summary when the run ends.
export class Results {
  constructor(container, title, machines, { onDone } = {}) {
    this.total = machines.length;
    this.done = 0;
    this.failed = 0;
    this.title = title;
    this.onDone = onDone;
    this.cancelled = false;
    this.items = new Map();
    this.summary = h('p', { class: 'summary' });
    this.cancelBtn = h('button', { type: 'button', onclick: () => { this.cancelled = true; } }, 'Stop');
    const list = h('ol', { class: 'results-list' }, machines.map((m) => {
      const status = h('span', { class: 'status' }, 'waiting');
      const li = h('li', { class: 'pending', dataset: { id: m.id } },
        h('a', { href: `#/machines/${enc(m.id)}` }, nameOf(m)), ' ', status);
      this.items.set(m.id, { li, status });
      return li;
    }));
    const hid = newId('res');
    this.el = h('section', { class: 'results card', 'aria-labelledby': hid },
      h('div', { class: 'results-head' },
        h('h2', { id: hid }, title), this.summary, this.cancelBtn,
        h('button', { type: 'button', 'aria-label': `Close the results of ${title}`, onclick: () => this.el.remove() }, 'Close')),
      list);
    container.replaceChildren(this.el);
    this.update();
  }

  set(m, state, text) {
    const it = this.items.get(m.id);
    if (!it) return;
    it.li.className = state;
    it.status.textContent = text;
  }

  update() {
    const left = this.total - this.done;
    let s = `${this.done.toLocaleString('en')} of ${this.total.toLocaleString('en')} done`;
    if (this.failed) s += `, ${this.failed.toLocaleString('en')} failed`;
    if (this.cancelled && left) s += `, ${left.toLocaleString('en')} not run (stopped)`;
    this.summary.textContent = s;
  }

  finish() {
    this.cancelBtn.remove();
    this.update();
    const ok = this.done - this.failed;
    announce(`${this.title}: ${ok} succeeded${this.failed ? `, ${this.failed} failed` : ''}.`);
    this.onDone?.();
  }
}

// run executes an action on each machine, 8 at a time, and fills a Results
// panel in container.
export async function run(key, machines, values, container, opts = {}) {
  const a = ACTIONS[key];
  const res = new Results(container, a.label.replace(/…$/, ''), machines, opts);
  announce(`${a.label.replace(/…$/, '')} started for ${who(machines)}.`);
  let next = 0;
  const worker = async () => {
    while (next < machines.length && !res.cancelled) {
      const m = machines[next];
      next += 1;
      res.set(m, 'running', 'running…');
      try {
        const out = await a.run(m, values);
        res.set(m, 'ok', out.text);
      } catch (e) {
        res.failed += 1;
        res.set(m, 'fail', `failed: ${e.message}`);
      }
      res.done += 1;
      res.update();
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, machines.length) }, worker));
  for (const m of machines.slice(next)) res.set(m, 'skipped', 'not run');
  res.finish();
  return res;
}
