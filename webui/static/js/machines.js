// The machines page: a table of every machine that stays fast at 10,000
// rows. Only the rows in view (plus a few) exist in the DOM; they are
// reused as the table scrolls. Filtering, sorting and selection work on the
// prepared list in memory; the list itself follows the node through a
// blocking query (api.machines).

import { machines as live, enc } from './api.js';
import { h, id as newId, announce, ago, placeChips, tagChips } from './dom.js';
import { rows as prepare, matcher, natKey, byKey, STATES } from './fleet.js';
import { ACTIONS, ACTION_ORDER, ask, run } from './actions.js';
import { locationDialog, addMachineDialog } from './machineforms.js';
import { followNodes, nodeSummary } from './stateless.js';

// nodes are the stateless nodes by machine ID, joined into the Node column.
let nodes = new Map();

// Each column sorts by a key computed once per row (text columns: a
// natural-order key compared with < and >).
const text = (field) => (r) => {
  const k = `_k_${field}`;
  if (r[k] === undefined) r[k] = natKey(r[field]);
  return r[k];
};
const COLS = [
  { key: 'name', label: 'Name', cls: 'c-name', sortKey: (r) => r.nameKey },
  { key: 'state', label: 'State', cls: 'c-state', sortKey: (r) => STATES.indexOf(r.state) },
  { key: 'node', label: 'Node', cls: 'c-node', sortKey: (r) => natKey(nodes.get(r.id)?.name) },
  { key: 'location', label: 'Location', cls: 'c-loc', sortKey: text('location') },
  { key: 'tags', label: 'Tags', cls: 'c-tags', sortKey: text('tagText') },
  { key: 'serial', label: 'Serial', cls: 'c-serial', sortKey: text('serial') },
  { key: 'model', label: 'Model', cls: 'c-model', sortKey: text('model') },
  { key: 'cpu', label: 'CPU', cls: 'c-cpu', sortKey: (r) => r.cores },
  { key: 'memory', label: 'Memory', cls: 'c-mem num', sortKey: (r) => r.memoryBytes },
  { key: 'storage', label: 'Storage', cls: 'c-storage', sortKey: (r) => r.storageBytes },
  { key: 'gpus', label: 'GPUs', cls: 'c-gpu', sortKey: (r) => r.gpuCount },
  { key: 'address', label: 'IP / MAC', cls: 'c-addr', sortKey: text('address') },
  { key: 'bmc', label: 'BMC', cls: 'c-bmc', sortKey: text('bmc') },
  { key: 'updated', label: 'Updated', cls: 'c-updated', sortKey: (r) => r.updated },
];

// What the operator chose survives moving to a machine and back.
const view = { q: '', state: '', sort: 'name', dir: 1, selected: new Set(), activeId: null, scrollTop: 0 };

const OVERSCAN = 8;

export function mount(main, route) {
  if (route.query.has('state')) view.state = route.query.get('state');
  if (route.query.has('q')) view.q = route.query.get('q');
  main.classList.add('fill');

  let all = [];
  let beat = 0; // counts the node list's answers: a new one redraws the Node cells (their ages)
  let sorted = null; // all, in the chosen order; null when it must be sorted again
  let shown = [];
  let byId = new Map();
  let first = true;
  let active = 0;
  let rowH = 40;
  let anchor = null; // for shift-click ranges
  const pool = [];

  // ---- toolbar
  const qid = newId('q');
  const sid = newId('state');
  const search = h('input', {
    id: qid, type: 'search', value: view.q, placeholder: 'Name, serial, MAC or IP', autocomplete: 'off', spellcheck: 'false',
    'aria-controls': 'machines-grid',
  });
  const stateSel = h('select', { id: sid, 'aria-controls': 'machines-grid' });
  const count = h('p', { class: 'count', id: 'machines-count' });
  const selInfo = h('span', { class: 'selinfo' });
  const clearSel = h('button', { type: 'button', class: 'link', onclick: () => { view.selected.clear(); refreshSelection(); } }, 'Clear selection');
  const actionButtons = [h('button', { type: 'button', class: 'act', dataset: { action: 'location' }, onclick: () => setLocation() }, 'Set location…'),
    ...ACTION_ORDER.map((key) => h('button', {
      type: 'button', class: ACTIONS[key].destructive ? 'act danger-text' : 'act', dataset: { action: key },
      onclick: () => act(key),
    }, ACTIONS[key].label))];
  const results = h('div', { class: 'results-slot' });

  const toolbar = h('div', { class: 'toolbar' },
    h('div', { class: 'field inline grow' }, h('label', { for: qid }, 'Filter'), search),
    h('div', { class: 'field inline' }, h('label', { for: sid }, 'State'), stateSel),
    count);
  const actionbar = h('div', { class: 'actionbar', role: 'toolbar', 'aria-label': 'Actions on the selected machines' },
    selInfo, clearSel, h('span', { class: 'sep', 'aria-hidden': 'true' }), actionButtons);

  // ---- the grid
  const selectAll = h('input', { type: 'checkbox', 'aria-label': 'Select all shown machines' });
  const headRow = h('div', { role: 'row', class: 'grow-row head', 'aria-rowindex': '1' },
    h('div', { role: 'columnheader', class: 'c-check' }, selectAll),
    COLS.map((c) => h('div', { role: 'columnheader', class: c.cls, dataset: { key: c.key } },
      h('button', { type: 'button', class: 'sort', onclick: () => sortBy(c.key) }, c.label, h('span', { class: 'arrow', 'aria-hidden': 'true' })))));
  const canvas = h('div', { class: 'grid-canvas', role: 'rowgroup' });
  const body = h('div', { class: 'grid-body' }, canvas);
  const emptyMsg = h('div', { class: 'grid-empty hidden' });
  const grid = h('div', {
    id: 'machines-grid', class: 'grid', role: 'grid', 'aria-label': 'Machines', 'aria-multiselectable': 'true',
    'aria-colcount': String(COLS.length + 1), 'aria-describedby': 'machines-count',
  }, h('div', { role: 'rowgroup', class: 'grid-head' }, headRow), body, emptyMsg);

  main.append(
    h('div', { class: 'page-head with-buttons' }, h('h1', {}, 'Machines'),
      h('button', { type: 'button', id: 'add-machine', onclick: () => addMachine() }, 'Add machine…')),
    toolbar, actionbar, results, grid);
  rowH = parseFloat(getComputedStyle(grid).getPropertyValue('--row-h')) || 40;

  // ---- data → shown rows
  function apply(announceCount) {
    const test = matcher(view.q);
    const st = view.state;
    if (!sorted) {
      // Sort once per answer or per choice of column; filtering keeps the order.
      const col = COLS.find((c) => c.key === view.sort) || COLS[0];
      const dir = view.dir;
      const keyed = all.map((r) => [col.sortKey(r), r.nameKey, r]);
      keyed.sort((a, b) => dir * byKey(a[0], b[0]) || byKey(a[1], b[1]));
      sorted = keyed.map((x) => x[2]);
    }
    shown = !st && !test ? sorted : sorted.filter((r) => (!st || r.state === st) && (!test || test(withNode(r))));
    const idx = view.activeId ? shown.findIndex((r) => r.id === view.activeId) : -1;
    active = idx >= 0 ? idx : Math.min(active, Math.max(0, shown.length - 1));
    canvas.style.height = `${shown.length * rowH}px`;
    grid.setAttribute('aria-rowcount', String(shown.length + 1));
    const n = shown.length.toLocaleString('en');
    count.textContent = shown.length === all.length ? `${n} machines` : `${n} of ${all.length.toLocaleString('en')} machines`;
    if (announceCount) announceSoon(`${n} machines shown`);
    for (const c of headRow.querySelectorAll('[role=columnheader][data-key]')) {
      const on = c.dataset.key === view.sort;
      c.setAttribute('aria-sort', on ? (view.dir > 0 ? 'ascending' : 'descending') : 'none');
      c.querySelector('.arrow').textContent = on ? (view.dir > 0 ? '▲' : '▼') : '';
    }
    if (!all.length) {
      emptyMsg.replaceChildren(h('p', {}, h('strong', {}, 'No machines yet. '),
        'A server appears here when it network-boots on a VLAN this appliance serves and runs the commissioning image. ',
        'You can also add one by hand: ', h('code', {}, 'rollcall add NAME MAC'), '.'));
    } else if (!shown.length) {
      emptyMsg.replaceChildren(h('p', {}, `No machine matches ${view.q ? `“${view.q}”` : ''}${view.q && view.state ? ' in ' : ''}${view.state ? `state ${view.state}` : ''}. `),
        h('button', { type: 'button', onclick: () => { view.q = ''; view.state = ''; search.value = ''; stateOptions(); apply(true); render(); } }, 'Show all machines'));
    }
    emptyMsg.classList.toggle('hidden', shown.length > 0);
    refreshSelection(false);
  }

  let announceTimer = null;
  function announceSoon(msg) {
    clearTimeout(announceTimer);
    announceTimer = setTimeout(() => announce(msg), 600);
  }

  function stateOptions() {
    const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
    for (const r of all) counts[r.state] = (counts[r.state] || 0) + 1;
    const opts = [['', `All states (${all.length.toLocaleString('en')})`],
      ...Object.keys(counts).map((s) => [s, `${s} (${counts[s].toLocaleString('en')})`])];
    stateSel.replaceChildren(...opts.map(([v, t]) => h('option', { value: v, selected: v === view.state }, t)));
  }

  // ---- rendering the visible rows
  function makeRow() {
    const check = h('input', { type: 'checkbox', tabindex: '-1' });
    const link = h('a', { tabindex: '-1' });
    const badge = h('span', { class: 'badge' });
    const cells = COLS.map((c) => h('div', { role: 'gridcell', class: c.cls }));
    cells[0].append(link);
    cells[1].append(badge);
    const el = h('div', { role: 'row', class: 'grow-row', tabindex: '-1' }, h('div', { role: 'gridcell', class: 'c-check' }, check), cells);
    const row = { el, check, link, badge, cells, index: -1 };
    el._row = row;
    return row;
  }

  function fill(row, i) {
    const r = shown[i];
    row.index = i;
    row.el.dataset.index = i;
    row.el.dataset.id = r.id;
    row.el.style.transform = `translateY(${i * rowH}px)`;
    row.el.setAttribute('aria-rowindex', String(i + 2));
    const sel = view.selected.has(r.id);
    row.el.setAttribute('aria-selected', sel ? 'true' : 'false');
    row.el.tabIndex = i === active ? 0 : -1;
    row.check.checked = sel;
    row.check.setAttribute('aria-label', `Select ${r.name}`);
    row.link.textContent = r.name;
    row.link.href = `#/machines/${enc(r.id)}`;
    row.badge.textContent = r.state;
    row.badge.className = `badge state-${r.state}`;
    const c = row.cells;
    const n = nodes.get(r.id);
    const nodeKey = n ? `${n.name} ${n.booted} ${n.last_seen} ${n.stale} ${beat}` : '';
    if (row.nodeKey !== nodeKey) {
      row.nodeKey = nodeKey;
      c[2].replaceChildren(n ? nodeSummary(n) : '');
    }
    if (row.place !== r.location) {
      row.place = r.location;
      c[3].replaceChildren(r.location ? placeChips(r.loc) : '');
      for (const a of c[3].querySelectorAll('a')) a.tabIndex = -1;
      if (r.location) c[3].title = r.location; else c[3].removeAttribute('title');
    }
    if (row.tagText !== r.tagText) {
      row.tagText = r.tagText;
      c[4].replaceChildren(r.tagText ? tagChips(r.tags, r.autoTags) : '');
      for (const a of c[4].querySelectorAll('a')) a.tabIndex = -1;
      if (r.tagText) c[4].title = r.tagText; else c[4].removeAttribute('title');
    }
    cell(c[5], r.serial);
    cell(c[6], r.model);
    cell(c[7], r.cpu);
    cell(c[8], r.memory);
    cell(c[9], r.storage);
    cell(c[10], r.gpus);
    cell(c[11], r.address);
    cell(c[12], r.bmc);
    c[12].classList.toggle('bad', r.bmcError);
    c[13].replaceChildren(r.updated ? ago(r.updated) : '');
  }

  // cell sets a cell's text, with the whole of it as a tooltip when the
  // column may cut it short.
  function cell(el, text) {
    el.textContent = text;
    if (text) el.title = text; else el.removeAttribute('title');
  }

  function render() {
    const top = body.scrollTop;
    const height = body.clientHeight || 600;
    const from = Math.max(0, Math.floor(top / rowH) - OVERSCAN);
    const to = Math.min(shown.length, Math.ceil((top + height) / rowH) + OVERSCAN);
    const want = [];
    for (let i = from; i < to; i++) want.push(i);
    if (shown.length && (active < from || active >= to)) want.push(active); // the focus target always exists
    while (pool.length < want.length) { const r = makeRow(); pool.push(r); canvas.append(r.el); }
    const focused = canvas.contains(document.activeElement) ? document.activeElement : null;
    want.forEach((i, k) => { fill(pool[k], i); pool[k].el.hidden = false; });
    for (let k = want.length; k < pool.length; k++) { pool[k].el.hidden = true; pool[k].index = -1; }
    if (focused && focused.dataset.index !== undefined && Number(focused.dataset.index) !== active) focusActive();
  }

  let frame = 0;
  const schedule = () => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); }); };

  function rowEl(i) { return pool.find((r) => r.index === i)?.el; }

  function focusActive() {
    const el = rowEl(active);
    if (el) el.focus({ preventScroll: true });
  }

  function moveTo(i) {
    if (!shown.length) return;
    active = Math.max(0, Math.min(shown.length - 1, i));
    view.activeId = shown[active].id;
    const y = active * rowH;
    if (y < body.scrollTop) body.scrollTop = y;
    else if (y + rowH > body.scrollTop + body.clientHeight) body.scrollTop = y + rowH - body.clientHeight;
    render();
    focusActive();
  }

  // ---- selection
  function toggle(i, range) {
    const r = shown[i];
    if (!r) return;
    const on = !view.selected.has(r.id);
    if (range && anchor !== null) {
      const [a, b] = [Math.min(anchor, i), Math.max(anchor, i)];
      for (let k = a; k <= b; k++) { if (on) view.selected.add(shown[k].id); else view.selected.delete(shown[k].id); }
    } else if (on) view.selected.add(r.id); else view.selected.delete(r.id);
    anchor = i;
    refreshSelection();
  }

  function refreshSelection(redraw = true) {
    for (const sid2 of view.selected) if (!byId.has(sid2)) view.selected.delete(sid2);
    let inView = 0;
    for (const r of shown) if (view.selected.has(r.id)) inView += 1;
    const n = view.selected.size;
    selectAll.checked = shown.length > 0 && inView === shown.length;
    selectAll.indeterminate = inView > 0 && inView < shown.length;
    selectAll.setAttribute('aria-label', selectAll.checked
      ? `Deselect all ${shown.length.toLocaleString('en')} shown machines`
      : `Select all ${shown.length.toLocaleString('en')} shown machines`);
    const hidden = n - inView;
    selInfo.textContent = n ? `${n.toLocaleString('en')} selected${hidden ? ` (${hidden.toLocaleString('en')} hidden by the filter)` : ''}` : 'None selected';
    clearSel.hidden = !n;
    for (const b of actionButtons) b.disabled = !n;
    actionbar.classList.toggle('has-selection', n > 0);
    if (redraw) render();
  }

  selectAll.addEventListener('change', () => {
    const allOn = shown.length > 0 && shown.every((r) => view.selected.has(r.id));
    for (const r of shown) { if (allOn) view.selected.delete(r.id); else view.selected.add(r.id); }
    refreshSelection();
    announce(allOn ? 'Selection cleared for the shown machines' : `${shown.length.toLocaleString('en')} machines selected`);
  });

  // ---- events
  search.addEventListener('input', () => {
    const t0 = performance.now();
    view.q = search.value;
    body.scrollTop = 0;
    apply(true);
    render();
    markPaint('rollcall:filter', t0);
  });
  search.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown' && shown.length) { e.preventDefault(); moveTo(body.scrollTop ? active : 0); }
    if (e.key === 'Escape' && search.value) { e.preventDefault(); search.value = ''; search.dispatchEvent(new Event('input')); }
  });
  stateSel.addEventListener('change', () => { view.state = stateSel.value; body.scrollTop = 0; apply(true); render(); });
  body.addEventListener('scroll', () => { view.scrollTop = body.scrollTop; schedule(); }, { passive: true });
  const ro = new ResizeObserver(schedule);
  ro.observe(body);

  canvas.addEventListener('click', (e) => {
    const el = e.target.closest('[role=row]');
    if (!el) return;
    const i = Number(el.dataset.index);
    active = i;
    view.activeId = shown[i]?.id;
    if (e.target.type === 'checkbox') { toggle(i, e.shiftKey); setTimeout(() => rowEl(i)?.focus({ preventScroll: true })); return; }
    if (e.target.closest('.c-check')) { toggle(i, e.shiftKey); return; }
    if (e.target.closest('a')) return;
    location.hash = `#/machines/${enc(shown[i].id)}`;
  });

  canvas.addEventListener('keydown', (e) => {
    const el = e.target.closest('[role=row]');
    if (!el) return;
    const i = Number(el.dataset.index);
    const page = Math.max(1, Math.floor(body.clientHeight / rowH) - 1);
    const keys = {
      ArrowDown: () => moveTo(i + 1), ArrowUp: () => (i === 0 ? search.focus() : moveTo(i - 1)),
      PageDown: () => moveTo(i + page), PageUp: () => moveTo(i - page),
      Home: () => moveTo(0), End: () => moveTo(shown.length - 1),
      Enter: () => { location.hash = `#/machines/${enc(shown[i].id)}`; },
      ' ': () => { toggle(i, e.shiftKey); },
    };
    if (e.key === 'a' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); selectAll.click(); return; }
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });

  function sortBy(key) {
    if (view.sort === key) view.dir = -view.dir; else { view.sort = key; view.dir = 1; }
    sorted = null;
    apply(false);
    render();
    const c = COLS.find((x) => x.key === key);
    announce(`Sorted by ${c.label}, ${view.dir > 0 ? 'ascending' : 'descending'}`);
  }

  async function act(key) {
    const ms = all.filter((r) => view.selected.has(r.id)).map((r) => r.m);
    if (!ms.length) return;
    const values = await ask(key, ms);
    if (!values) return;
    run(key, ms, values, results, { onDone: () => { if (key === 'delete') { for (const m of ms) view.selected.delete(m.id); refreshSelection(); } } });
  }

  async function setLocation() {
    const ms = all.filter((r) => view.selected.has(r.id)).map((r) => r.m);
    if (!ms.length) return;
    const out = await locationDialog(ms);
    if (!out) return;
    results.replaceChildren(h('div', { class: 'alert', role: 'status' },
      h('p', {}, `Location set for ${ms.length === 1 ? ms[0].name || ms[0].id : `${ms.length.toLocaleString('en')} machines`}.`)));
  }

  async function addMachine() {
    const m = await addMachineDialog();
    if (m && m.id) location.hash = `#/machines/${enc(m.id)}`;
  }

  // ---- the stateless nodes: the Node column, searched by the filter too,
  // its ages redrawn every 30 s
  const withNode = (r) => {
    const n = nodes.get(r.id);
    return n ? { hay: `${r.hay} ${n.name.toLowerCase()}` } : r;
  };
  const stopNodes = followNodes((m) => {
    nodes = m;
    grid.classList.toggle('with-nodes', nodes.size > 0);
    if (view.sort === 'node') sorted = null;
    beat += 1;
    if (all.length) { apply(false); render(); }
  });

  // ---- following the list
  const t0 = performance.now();
  const unsubscribe = live.subscribe((data, err) => {
    if (err && !data) {
      emptyMsg.replaceChildren(h('p', { role: 'alert' }, `Could not load the machines: ${err.message}`));
      emptyMsg.classList.remove('hidden');
      return;
    }
    if (!data) return;
    all = prepare(data);
    sorted = null;
    byId = new Map(all.map((r) => [r.id, r]));
    stateOptions();
    apply(false);
    if (first) { body.scrollTop = view.scrollTop; }
    render();
    if (first) { first = false; markPaint('rollcall:machines-paint', t0, true); }
  });
  grid.setAttribute('aria-busy', 'true');
  if (!live.data) count.textContent = 'Loading machines…';
  stateOptions();
  refreshSelection(false);

  function markPaint(name, start, fromNavigation) {
    grid.removeAttribute('aria-busy');
    // The frame after the next is the one that has painted the rows.
    requestAnimationFrame(() => setTimeout(() => {
      const end = performance.now();
      performance.measure(name, { start: fromNavigation ? 0 : start, end });
      if (fromNavigation) performance.measure(`${name}-since-page`, { start, end });
    }));
  }

  return () => {
    unsubscribe();
    stopNodes();
    ro.disconnect();
    cancelAnimationFrame(frame);
    clearTimeout(announceTimer);
  };
}
