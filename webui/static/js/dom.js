// Small DOM and formatting helpers. Data from the API only ever reaches the
// page through textContent and attributes set here, never innerHTML.

// h builds an element: h('a', {href: '#/x', class: 'c', onclick: fn}, 'text', child…).
// Attributes whose value is null, undefined or false are left out; true sets
// an empty attribute; style is an object of properties ({gridRow: '3'}). Children may be strings, numbers, nodes, arrays or null.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') {
      // Through the CSSOM: the page's CSP refuses style attributes.
      for (const [p, x] of Object.entries(v)) {
        if (p.startsWith('--')) el.style.setProperty(p, String(x)); else el.style[p] = String(x);
      }
    }
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'indeterminate') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

let uid = 0;
// id returns a fresh element id for aria-labelledby and label[for].
export function id(prefix = 'el') {
  uid += 1;
  return `${prefix}-${uid}`;
}

const announcer = () => document.getElementById('announcer');
// announce says something to screen readers through the page's live region.
export function announce(msg) {
  const el = announcer();
  if (!el) return;
  el.textContent = '';
  // A fresh text node a moment later is announced even when it repeats.
  requestAnimationFrame(() => { el.textContent = msg; });
}

// ---- formatting

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
export function bytes(n) {
  if (!n) return '—';
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1).replace(/\.0$/, '')} ${units[i]}`;
}

// diskSize is decimal, as drives are sold.
export function diskSize(n) {
  if (!n) return '—';
  const u = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < u.length - 1) { v /= 1000; i += 1; }
  return `${v >= 100 ? Math.round(v) : v.toFixed(1).replace(/\.0$/, '')} ${u[i]}`;
}

export function num(n) {
  return n === undefined || n === null ? '—' : Number(n).toLocaleString('en');
}

const dateFmt = new Intl.DateTimeFormat('en-GB', {
  year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
});
export function when(t) {
  if (!t || t.startsWith('0001-')) return '—';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : dateFmt.format(d);
}

// ago is a short relative time, with the full time in a title.
export function ago(t) {
  if (!t || t.startsWith('0001-')) return h('span', {}, '—');
  const d = new Date(t);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  let text;
  if (s < 45) text = 'just now';
  else if (s < 3600) text = `${Math.round(s / 60)} min ago`;
  else if (s < 86400) text = `${Math.round(s / 3600)} h ago`;
  else text = `${Math.round(s / 86400)} d ago`;
  return h('time', { datetime: t, title: when(t) }, text);
}

// ---- building blocks used by several pages

export function stateBadge(state) {
  return h('span', { class: `badge state-${state || 'unknown'}` }, state || 'unknown');
}

// placeChips draws a location as building › room › rack chips, the rack a
// link to its elevation, and the units after it.
export function placeChips(loc, { link: withLink = true } = {}) {
  if (!loc || !(loc.building || loc.room || loc.rack)) return h('span', { class: 'muted' }, '—');
  const parts = [];
  const chip = (kind, text, href) => h(href ? 'a' : 'span', { class: `chip chip-${kind}`, href: href || null, title: `${kind} ${text}` }, text);
  if (loc.building) parts.push(chip('building', loc.building));
  if (loc.room) parts.push(chip('room', loc.room));
  if (loc.rack) parts.push(chip('rack', loc.rack, withLink ? `#/racks/${encodeURIComponent(loc.rack)}` : null));
  const out = h('span', { class: 'chips place' });
  parts.forEach((p, i) => { if (i) out.append(h('span', { class: 'sep', 'aria-hidden': 'true' }, '›')); out.append(p); });
  if (loc.unit) {
    const top = loc.unit + (loc.height || 1) - 1;
    out.append(h('span', { class: 'unit' }, top > loc.unit ? `U${loc.unit}–${top}` : `U${loc.unit}`));
  }
  return out;
}

// tagChips draws a machine's tags: manual ones plain, rule-made ones marked.
export function tagChips(tags = [], auto = []) {
  if (!tags.length && !auto.length) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'chips tags' },
    tags.map((t) => h('a', { class: 'chip chip-tag', href: `#/tags/${encodeURIComponent(t)}`, title: `tag ${t}` }, t)),
    auto.map((t) => h('a', { class: 'chip chip-tag auto', href: `#/tags/${encodeURIComponent(t)}`, title: `tag ${t}, from its match rule` }, t)));
}

// dl renders [label, value] pairs, skipping empty values.
export function dl(pairs, cls = 'facts') {
  const el = h('dl', { class: cls });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
    el.append(h('dt', {}, k), h('dd', {}, v));
  }
  return el;
}

// table renders rows under a caption. cols: [{label, get(row) → node|string, cls}].
// Wide tables scroll inside a focusable, labelled region (keyboard users can
// scroll it with the arrow keys).
export function table(caption, cols, rows, opts = {}) {
  const t = h('table', { class: `data ${opts.cls || ''}` },
    h('caption', { class: opts.showCaption ? '' : 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col', class: c.cls }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', { class: opts.rowClass ? opts.rowClass(r) : null },
      cols.map((c, i) => (i === 0 && opts.rowHeader !== false
        ? h('th', { scope: 'row', class: c.cls }, c.get(r) ?? '—')
        : h('td', { class: c.cls }, c.get(r) ?? '—')))))));
  return h('div', { class: 'table-wrap', role: 'region', 'aria-label': caption, tabindex: '0' }, t);
}

export function section(title, ...body) {
  const hid = id('sec');
  return h('section', { class: 'card', 'aria-labelledby': hid }, h('h2', { id: hid }, title), ...body);
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

export function errorBox(err, retry) {
  return h('div', { class: 'alert error', role: 'alert' },
    h('p', {}, h('strong', {}, 'Could not load this page. '), err.message || String(err)),
    retry ? h('button', { type: 'button', onclick: retry }, 'Try again') : null);
}

export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}
