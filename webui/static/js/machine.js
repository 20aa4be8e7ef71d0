// One machine: identity, state and its history, the BMC (never its
// password), jobs, events and the whole inventory. It follows the machine
// through a blocking query on the machine list narrowed to its ID, which
// the node answers when any machine or event changes; the page then reads
// the machine again.

import { get, watch, enc, hasRoute } from './api.js';
import { h, dl, table, section, empty, when, ago, stateBadge, errorBox, announce, placeChips, tagChips } from './dom.js';
import { asset } from './fleet.js';
import { renameDialog, bmcDialog, clearBMCDialog, locationDialog, tagsDialog } from './machineforms.js';
import { networkCard } from './machinenet.js';
import { sections as inventorySections } from './inventory.js';
import { ACTIONS, ACTION_ORDER, ask, run } from './actions.js';
import { shortCPU } from './fleet.js';
import { panel as deploymentPanel } from './deploy.js';
import { followNodes, nodeCard } from './stateless.js';

const LIFECYCLE = new Set(['created', 'enlisted', 'commissioned', 'recommission', 'state', 'mac-moved']);

export function mount(main, route) {
  const ref = route.parts[1];
  const ctrl = new AbortController();
  let detail = null;
  let jobs = [];
  let invKey = null;
  let seenEvents = null;
  // Rename and clearing a BMC need routes an older node (a rolling
  // upgrade) lacks: offered once this node says it serves them.
  let canRename = false;
  let canClearBMC = false;
  hasRoute('POST', '/api/v1/machines/{id}/rename').then((ok) => { canRename = ok; if (ok && detail) draw(); });
  hasRoute('DELETE', '/api/v1/machines/{id}/bmc').then((ok) => { canClearBMC = ok; if (ok && detail) draw(); });

  const head = h('div', { class: 'page-head' });
  const actionbar = h('div', { class: 'actionbar', role: 'toolbar', 'aria-label': 'Actions on this machine' },
    ACTION_ORDER.map((key) => h('button', {
      type: 'button', class: ACTIONS[key].destructive ? 'act danger-text' : 'act', onclick: () => act(key),
    }, ACTIONS[key].label)));
  const results = h('div', { class: 'results-slot' });
  const toc = h('nav', { class: 'toc', 'aria-label': 'Sections of this page' });
  const top = h('div', { class: 'cols' });
  const describe = h('div', { class: 'cols' });
  const lower = h('div', { class: 'stack' });
  const net = networkCard(ref);
  const inv = h('div', { class: 'inventory' });
  const status = h('div', { class: 'notice-slot' });
  const deployment = deploymentPanel(ref, ctrl.signal);
  // The stateless node this machine is, if it is one.
  const nodeSlot = h('div', { class: 'node-slot' });
  const stopNodes = followNodes((nodes) => {
    const n = nodes.get(detail ? detail.id : ref);
    nodeSlot.replaceChildren(n ? nodeCard(n) : '');
  });
  main.append(head, status, actionbar, results, deployment, nodeSlot, toc, top, describe, net.el, lower,
    h('h2', { class: 'inv-title', id: 'inventory' }, 'Inventory'), inv);
  head.append(h('p', { class: 'muted' }, 'Loading…'));

  async function act(key) {
    if (!detail) return;
    const values = await ask(key, [detail]);
    if (!values) return;
    run(key, [detail], values, results, {
      onDone: () => { if (key === 'delete') location.hash = '#/machines'; },
    });
  }

  async function load() {
    // By its ID once known (the page moves to it, below): a machine
    // renamed while it is shown stays shown.
    const key = detail ? detail.id : ref;
    const [d, j] = await Promise.all([
      get(`/api/v1/machines/${enc(key)}`, { signal: ctrl.signal }),
      get(`/api/v1/machines/${enc(key)}/jobs`, { signal: ctrl.signal }).catch(() => ({ data: { jobs: [] } })),
    ]);
    detail = d.data;
    jobs = j.data?.jobs || [];
    draw();
  }

  function draw() {
    const m = detail;
    const s = m.summary || {};
    document.title = `${m.name || m.id} · Rollcall`;
    const focusedHeading = document.activeElement && head.contains(document.activeElement);
    head.replaceChildren(
      h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/machines' }, 'Machines'), h('span', { 'aria-hidden': 'true' }, ' › '), h('span', { 'aria-current': 'page' }, m.name || m.id)),
      h('h1', { tabindex: '-1' }, m.name || m.id, ' ', stateBadge(m.state),
        canRename ? h('button', { type: 'button', class: 'link small', id: 'rename', onclick: () => rename(m) }, 'Rename…') : null),
      h('p', { class: 'muted sub' }, [m.name ? m.id : null, [s.manufacturer, s.product].filter(Boolean).join(' '), m.serial ? `serial ${m.serial}` : null]
        .filter(Boolean).join(' · ')));
    if (focusedHeading) head.querySelector('h1').focus();

    top.replaceChildren(identity(m, s), bmc(m.bmc));
    describe.replaceChildren(place(m), tagsCard(m));
    net.update(m);
    lower.replaceChildren(history(m.events), jobsCard(jobs), eventsCard(m.events));

    const key = JSON.stringify(m.inventory || null);
    if (key !== invKey) {
      invKey = key;
      const secs = inventorySections(m.inventory);
      inv.replaceChildren(...(secs.length ? secs.map(([, , el]) => el)
        : [empty('No inventory yet: the machine has not been commissioned. It is taken when the machine network-boots the commissioning image.')]));
      toc.replaceChildren(h('ul', {}, [['identity', 'Identity'], ['bmc', 'BMC'], ['location', 'Location'], ['tags', 'Tags'], ['network', 'Network'], ['history', 'History'], ['jobs', 'Jobs'], ['events', 'Events'],
        ...secs.map(([k, t]) => [`inv-${k}`, t])].map(([target, t]) => h('li', {},
        h('button', { type: 'button', class: 'link', onclick: () => jump(target) }, t)))));
    }
  }

  async function rename(m) {
    if (await renameDialog(m)) load().catch(fail);
  }

  function jump(target) {
    const el = document.getElementById(target);
    if (!el) return;
    el.scrollIntoView({ behavior: 'smooth', block: 'start' });
    const hd = el.querySelector('h2, h3') || el;
    hd.tabIndex = -1;
    hd.focus({ preventScroll: true });
  }

  function identity(m, s) {
    const card = section('Identity', dl([
      ['ID', h('code', {}, m.id)],
      ['Name', m.name],
      ['State', stateBadge(m.state)],
      ['Serial', m.serial],
      ['System UUID', m.system_uuid ? h('code', {}, m.system_uuid) : null],
      ['Recognised by', m.identity_key],
      ['Boot MAC', m.boot_mac ? h('code', {}, m.boot_mac) : null],
      ['MACs', m.macs?.length ? h('ul', { class: 'plain' }, m.macs.map((x) => h('li', {}, h('code', {}, x)))) : null],
      ['IP addresses', m.ips?.length ? h('ul', { class: 'plain' }, m.ips.map((x) => h('li', {}, x))) : null],
      ['Hardware', [s.cpu_model ? `${s.sockets || 1}× ${shortCPU(s.cpu_model)} (${s.cores} cores, ${s.threads} threads)` : null,
        s.memory_bytes ? `${(s.memory_bytes / 2 ** 30).toFixed(0)} GiB memory` : null,
        s.gpus ? `${s.gpus} GPUs` : null].filter(Boolean).join(' · ')],
      ['Created', when(m.created_at)],
      ['Updated', when(m.updated_at)],
      ['Last seen', when(m.last_seen)],
      ['Commissioned', when(m.commissioned)],
    ]));
    card.id = 'identity';
    return card;
  }

  function place(m) {
    const loc = m.location || {};
    const card = section('Location', dl([
      ['Place', loc.building || loc.room || loc.rack ? placeChips(loc) : null],
      ['Unit', loc.unit ? `U${loc.unit}${(loc.height || 1) > 1 ? `–${loc.unit + loc.height - 1} (${loc.height} units)` : ''}` : null],
      ['Asset tag', asset(loc)],
    ]), !(loc.building || loc.room || loc.rack || asset(loc)) ? empty('Not placed yet.') : null,
    h('div', { class: 'buttons start' }, h('button', { type: 'button', id: 'edit-location', onclick: () => locationDialog([m]) }, 'Edit location…')));
    card.id = 'location';
    return card;
  }

  function tagsCard(m) {
    const card = section('Tags', (m.tags || []).length || (m.auto_tags || []).length
      ? [tagChips(m.tags, m.auto_tags), (m.auto_tags || []).length ? h('p', { class: 'help' }, 'Outlined tags come from match rules.') : null]
      : empty('No tags.'),
    h('div', { class: 'buttons start' }, h('button', { type: 'button', id: 'edit-tags', onclick: () => tagsDialog(m) }, 'Change tags…')));
    card.id = 'tags';
    return card;
  }

  function bmc(b) {
    let body;
    const buttons = h('div', { class: 'buttons start' },
      h('button', { type: 'button', id: 'edit-bmc', onclick: () => bmcDialog(detail) }, b ? 'Change BMC…' : 'Set BMC…'),
      b && canClearBMC ? h('button', { type: 'button', class: 'danger-text', id: 'clear-bmc', onclick: () => clearBMCDialog(detail) }, 'Clear BMC…') : null);
    if (!b) {
      body = [empty('No BMC known. The commissioning agent sets one up through in-band IPMI, or set one here.'), buttons];
    } else {
      body = [dl([
        ['Driver', b.driver],
        ['Address', b.address ? h('code', {}, b.address) : null],
        ['MAC', b.mac],
        ['User', b.user],
        ['Password', b.has_password ? 'set (sealed on the nodes; never shown)' : 'not set'],
        ['Set by', b.source],
        ['Settings', b.settings && Object.keys(b.settings).length
          ? h('ul', { class: 'plain' }, Object.entries(b.settings).map(([k, v]) => h('li', {}, h('code', {}, `${k}=${v}`)))) : null],
        ['Updated', when(b.updated_at)],
      ]),
      b.errors?.length ? h('div', { class: 'alert error' }, h('p', {}, h('strong', {}, 'BMC errors')), h('ul', {}, b.errors.map((e) => h('li', {}, e)))) : null,
      buttons];
    }
    const card = section('BMC', body);
    card.id = 'bmc';
    return card;
  }

  function history(events) {
    const life = (events || []).filter((e) => LIFECYCLE.has(e.kind));
    const card = section('State history', life.length
      ? h('ol', { class: 'timeline' }, life.map((e) => h('li', {},
        h('span', { class: 'when' }, ago(e.time)), ' ', h('strong', {}, e.kind), ' ', h('span', {}, e.message))))
      : empty('No state changes recorded.'));
    card.id = 'history';
    return card;
  }

  function jobsCard(list) {
    const card = section('BMC jobs', list.length ? table('BMC jobs, newest first', [
      { label: 'Created', get: (j) => ago(j.created) },
      { label: 'Job', get: (j) => `${j.kind}${j.arg ? ` ${j.arg}` : ''}` },
      { label: 'Status', get: (j) => jobStatus(j) },
      { label: 'Result', get: (j) => (j.error ? h('span', { class: 'bad' }, j.error) : j.result) },
      { label: 'Ran on', get: (j) => j.started_by || j.runner || 'leader' },
      { label: 'Finished', get: (j) => (j.done ? ago(j.finished) : '—') },
    ], list) : empty('No BMC jobs yet.'));
    card.id = 'jobs';
    return card;
  }

  function eventsCard(events) {
    const evs = [...(events || [])].reverse();
    const fresh = seenEvents ? evs.filter((e) => !seenEvents.has(`${e.index}/${e.kind}/${e.message}`)) : [];
    seenEvents = new Set(evs.map((e) => `${e.index}/${e.kind}/${e.message}`));
    if (fresh.length) announce(`New event: ${fresh[0].kind}, ${fresh[0].message}`);
    const freshSet = new Set(fresh);
    const card = section('Events', evs.length ? table('Events, newest first', [
      { label: 'Time', get: (e) => h('time', { datetime: e.time }, when(e.time)) },
      { label: 'Kind', get: (e) => e.kind },
      { label: 'Message', get: (e) => e.message },
    ], evs, { rowClass: (e) => (freshSet.has(e) ? 'fresh' : null) }) : empty('No events yet.'));
    card.id = 'events';
    return card;
  }

  function fail(e) {
    if (e.name === 'AbortError') return;
    if (e.status === 404) {
      head.replaceChildren(h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/machines' }, 'Machines')),
        h('h1', {}, 'Machine not found'));
      status.replaceChildren(h('div', { class: 'alert', role: 'alert' },
        h('p', {}, `There is no machine ${ref}${detail ? ' any more: it was deleted' : ''}. `, h('a', { href: '#/machines' }, 'Back to the machines.'))));
      actionbar.hidden = true;
      ctrl.abort();
      return;
    }
    status.replaceChildren(errorBox(e, () => { status.replaceChildren(); load().catch(fail); }));
  }

  load().then(() => {
    if (detail.id !== ref) {
      // Opened by name: the page is the machine's, at its ID, so that every
      // part of it (network, deployment) follows it through a rename.
      location.replace(`#/machines/${enc(detail.id)}`);
      return;
    }
    // Wake up on any change to machines or events, then read this machine again.
    let firstAnswer = true;
    watch(`/api/v1/machines?q=${enc(detail.id)}`, () => {
      if (firstAnswer) { firstAnswer = false; return; }
      status.replaceChildren();
      load().catch(fail);
    }, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) fail(e); } });
  }).catch(fail);

  return () => { ctrl.abort(); stopNodes(); };
}

function jobStatus(j) {
  if (j.done) return j.error ? h('span', { class: 'badge bad' }, 'failed') : h('span', { class: 'badge ok' }, 'done');
  if (j.started_by) return h('span', { class: 'badge warn' }, 'running');
  return h('span', { class: 'badge' }, 'queued');
}

