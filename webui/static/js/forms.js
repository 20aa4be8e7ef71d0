// Forms that change what the CLI changes: fields with labels and help, and
// the API's refusal shown beside the field it concerns. The API answers
// {"error":{"code","message"}} (appliance/httpapi/errors.go); when the body
// names a field ("field"), that field gets the message; otherwise the field
// whose name the message mentions first does (a field may say how the API
// names it with `match`, which then replaces its own name), and a message that names none stands above
// the buttons.

import { h, id as newId, announce } from './dom.js';

// fieldEl builds one field. spec: {name, label, type, value, options,
// help, required, placeholder, autocomplete, rows, min, max, wide}. type is
// text (default), password, number, select, textarea or checkbox. A
// password field is never given a value: it is write-only.
export function fieldEl(spec) {
  const fid = newId('f');
  const hid = spec.help ? `${fid}-help` : null;
  const eid = `${fid}-err`;
  const err = h('p', { id: eid, class: 'field-error', hidden: true });
  const described = [hid, eid].filter(Boolean).join(' ');
  const common = {
    id: fid, name: spec.name, required: spec.required || null, 'aria-describedby': described,
    placeholder: spec.placeholder || null, readonly: spec.readonly || null, autocomplete: spec.autocomplete || 'off', spellcheck: 'false',
  };
  let input;
  switch (spec.type) {
    case 'checkbox':
      input = h('input', { ...common, type: 'checkbox', checked: !!spec.value, autocomplete: null, spellcheck: null });
      return wrap(spec, h('div', { class: 'field check', dataset: { field: spec.name } },
        input, h('label', { for: fid }, spec.label), spec.help ? h('p', { id: hid, class: 'help' }, spec.help) : null, err), input, err);
    case 'select':
      input = h('select', { ...common, spellcheck: null, autocomplete: null },
        (spec.options || []).map(([v, text]) => h('option', { value: v, selected: String(v) === String(spec.value ?? '') }, text)));
      break;
    case 'textarea':
      input = h('textarea', { ...common, rows: String(spec.rows || 6), class: spec.code ? 'code' : null });
      input.value = spec.value ?? '';
      break;
    case 'password':
      // Write-only: whatever the record holds never comes back into it.
      input = h('input', { ...common, type: 'password', autocomplete: 'new-password' });
      break;
    case 'number':
      input = h('input', { ...common, type: 'number', inputmode: 'numeric', min: spec.min ?? null, max: spec.max ?? null, value: spec.value ?? '' });
      break;
    default:
      input = h('input', { ...common, type: 'text', value: spec.value ?? '' });
  }
  return wrap(spec, h('div', { class: `field${spec.wide ? ' wide' : ''}`, dataset: { field: spec.name } },
    h('label', { for: fid }, spec.label, spec.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null),
    input, spec.help ? h('p', { id: hid, class: 'help' }, spec.help) : null, err), input, err);
}

function wrap(spec, el, input, err) {
  return { spec, el, input, err };
}

// valueOf reads a field as the API wants it: numbers as numbers (empty:
// undefined, so JSON leaves it out), checkboxes as booleans.
function valueOf(f) {
  const { spec, input } = f;
  if (spec.type === 'checkbox') return input.checked;
  if (spec.type === 'number') return input.value === '' ? undefined : Number(input.value);
  return input.value;
}

// Form is a set of fields with one place for a message that concerns none
// of them. submit(values) runs the change; an APIError it throws is shown.
export class Form {
  constructor(specs, { submit, confirm = 'Save', cancel = null, danger = false, extra = [] } = {}) {
    this.fields = specs.map(fieldEl);
    this.submit = submit;
    this.status = h('div', { class: 'alert error form-error', role: 'alert', hidden: true });
    this.button = h('button', { type: 'submit', class: danger ? 'danger' : 'primary' }, confirm);
    this.confirmLabel = confirm;
    this.el = h('form', { class: 'form', novalidate: true },
      h('div', { class: 'fields' }, this.fields.map((f) => f.el)),
      this.status,
      h('div', { class: 'buttons' }, extra, cancel ? h('button', { type: 'button', onclick: cancel }, 'Cancel') : null, this.button));
    this.el.addEventListener('submit', (ev) => { ev.preventDefault(); this.run(); });
  }

  field(name) { return this.fields.find((f) => f.spec.name === name); }

  values() {
    const out = {};
    for (const f of this.fields) out[f.spec.name] = valueOf(f);
    return out;
  }

  clearErrors() {
    this.status.className = 'alert error form-error';
    this.status.hidden = true;
    this.status.replaceChildren();
    for (const f of this.fields) {
      f.err.hidden = true;
      f.err.textContent = '';
      f.input.removeAttribute('aria-invalid');
    }
  }

  // show puts a message beside the field it names, or above the buttons.
  show(message, name) {
    const f = name ? this.field(name) : null;
    if (f) {
      f.err.textContent = message;
      f.err.hidden = false;
      f.input.setAttribute('aria-invalid', 'true');
      f.input.focus();
      announce(`${f.spec.label}: ${message}`);
      return;
    }
    this.status.replaceChildren(h('p', {}, message));
    this.status.hidden = false;
    announce(message);
  }

  // missing checks required fields before anything is sent.
  missing() {
    for (const f of this.fields) {
      if (f.spec.required && f.spec.type !== 'checkbox' && String(f.input.value).trim() === '') {
        this.show(`${f.spec.label} is required.`, f.spec.name);
        return true;
      }
    }
    return false;
  }

  async run() {
    this.clearErrors();
    if (this.missing()) return undefined;
    this.button.disabled = true;
    this.button.textContent = 'Saving…';
    try {
      const out = await this.submit(this.values(), this);
      return out;
    } catch (e) {
      if (e.name === 'AbortError') return undefined;
      if (e.field !== undefined) this.show(e.message, e.field);
      else this.show(e.message, fieldFor(e, this.fields.map((f) => f.spec), this.values()));
      return undefined;
    } finally {
      this.button.disabled = false;
      this.button.textContent = this.confirmLabel;
    }
  }
}

// FieldError is a refusal the page finds itself (a JSON document that does
// not parse), shown beside its field like the API's.
export class FieldError extends Error {
  constructor(field, message) {
    super(message);
    this.field = field;
  }
}

// fieldFor picks the field an API error concerns: the one the body names;
// else the one holding a value the message quotes back ("…"); else the one
// the message mentions first.
export function fieldFor(err, specs, values = {}) {
  const named = err?.body?.error?.field;
  if (named && specs.some((s) => s.name === named)) return named;
  const msg = String(err?.message || '');
  for (const [, quoted] of msg.matchAll(/"([^"]+)"/g)) {
    const holder = specs.find((s) => s.type !== 'password' && typeof values[s.name] === 'string' && values[s.name] !== ''
      && (values[s.name].trim() === quoted || values[s.name].includes(quoted)));
    if (holder) return holder.name;
  }
  let best = null;
  let at = Infinity;
  for (const s of specs) {
    // A field that says how the API names it (match) is known by that
    // alone; the others by their own name.
    const pats = s.match ? [].concat(s.match) : [new RegExp(`\\b${s.name.replaceAll('_', '[ _-]?')}\\b`, 'i')];
    for (const p of pats) {
      const m = p.exec(msg);
      if (m && m.index < at) { at = m.index; best = s.name; }
    }
  }
  if (best) return best;
  // No field named: the one whose value the message repeats first (a
  // range's "10.0.0.300–10.0.1.5 is outside …").
  for (const s of specs) {
    const v = values[s.name];
    if (s.type === 'password' || typeof v !== 'string' || v.trim().length < 3) continue;
    const i = msg.indexOf(v.trim());
    if (i >= 0 && i < at) { at = i; best = s.name; }
  }
  return best;
}

// formDialog shows a Form in a modal dialog that stays open while the API
// refuses, and resolves with what submit returned, or null when the
// operator cancels. Focus returns to where it was.
export function formDialog({ title, body = [], fields, confirm = 'Save', danger = false, submit, wide = false }) {
  const opener = document.activeElement;
  const tid = newId('dlg-title');
  const bid = newId('dlg-body');
  let result = null;
  let dlg;
  const form = new Form(fields, {
    confirm, danger,
    cancel: () => dlg.close('cancel'),
    submit: async (values, f) => {
      result = await submit(values, f);
      dlg.close('ok');
      return result;
    },
  });
  dlg = h('dialog', { class: `dialog${wide ? ' wide' : ''}`, 'aria-labelledby': tid, 'aria-describedby': bid },
    h('div', { class: 'dialog-inner' }, h('h2', { id: tid }, title), h('div', { id: bid, class: 'dialog-body' }, body), form.el));
  document.body.append(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      const ok = dlg.returnValue === 'ok';
      dlg.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(ok ? (result ?? {}) : null);
    });
    form.el.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); dlg.close('cancel'); } });
    dlg.showModal();
    const first = form.fields.find((f) => !f.input.disabled)?.input;
    if (first) first.focus();
    dlg._form = form;
  });
}

// split turns "a, b c" into ['a', 'b', 'c'].
export function split(s) {
  return String(s || '').split(/[\s,]+/).filter(Boolean);
}

// trimmed drops empty strings and undefined from an object, so the API
// sees only what the operator filled in.
export function trimmed(o) {
  const out = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === '' || (Array.isArray(v) && !v.length)) continue;
    out[k] = typeof v === 'string' ? v.trim() : v;
  }
  return out;
}

// confirmDelete asks before removing something by name.
export function confirmDelete(what, detail, run) {
  return formDialog({
    title: `Delete ${what}`,
    body: [h('p', {}, `This will delete ${what}.`), detail ? h('p', { class: 'warn' }, detail) : null],
    fields: [],
    confirm: 'Delete',
    danger: true,
    submit: run,
  });
}
