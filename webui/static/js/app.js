// Rollcall's web UI: sign-in, the page shell and the router. Pages are
// modules exporting mount(main, route) → cleanup; the route is the URL
// fragment (#/machines/m-…), so the token and nothing else stays out of the
// address bar and history.

import { token, get, signInByCertificate, setUnauthorizedHandler, APIError, machines as machineList, statelessNodes } from './api.js';
import { h, announce } from './dom.js';
import * as overview from './overview.js';
import * as doctor from './doctor.js';
import * as access from './access.js';
import * as machinesPage from './machines.js';
import * as machinePage from './machine.js';
import * as network from './network.js';
import * as images from './images.js';
import * as racks from './racks.js';
import * as tags from './tags.js';
import * as layouts from './layouts.js';
import * as osImages from './os.js';
import * as profiles from './profiles.js';
import { registerActions as registerDeployActions } from './deploy.js';
import { registerActions as registerStatelessActions } from './stateless.js';

const app = document.getElementById('app');
registerDeployActions();
registerStatelessActions();

const NAV = [
  ['#/', 'Overview', (p) => p === ''],
  ['#/machines', 'Machines', (p) => p.startsWith('machines')],
  ['#/racks', 'Racks', (p) => p.startsWith('racks')],
  ['#/tags', 'Tags', (p) => p.startsWith('tags')],
  ['#/network', 'Network', (p) => p.startsWith('network')],
  ['#/layouts', 'Layouts', (p) => p.startsWith('layouts')],
  ['#/images', 'Images', (p) => p.startsWith('images')],
  ['#/os', 'OS images', (p) => p.startsWith('os')],
  ['#/profiles', 'Profiles', (p) => p.startsWith('profiles') || p.startsWith('overlays')],
  ['#/doctor', 'Doctor', (p) => p.startsWith('doctor')],
  ['#/access', 'Access', (p) => p.startsWith('access')],
];

let cleanup = null;
let health = null;

function route() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [p, q = ''] = raw.split('?');
  return { path: p.replace(/\/$/, ''), parts: p.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q) };
}

function pageFor(r) {
  const [first, second] = r.parts;
  if (!first) return [overview, 'Overview'];
  if (first === 'machines' && second) return [machinePage, `Machine ${second}`];
  if (first === 'machines') return [machinesPage, 'Machines'];
  if (first === 'racks') return [racks, second ? `Rack ${second}` : 'Racks'];
  if (first === 'tags') return [tags, second ? `Tag ${second}` : 'Tags'];
  if (first === 'layouts') return [layouts, second ? `Layout ${second}` : 'Layouts'];
  if (first === 'network') return [network, 'Network'];
  if (first === 'images') return [images, 'Images'];
  if (first === 'os') return [osImages, 'OS images'];
  if (first === 'profiles') return [profiles, second ? `Profile ${second}` : 'Profiles'];
  if (first === 'overlays' && second) return [profiles, `Overlay ${second}`];
  if (first === 'doctor') return [doctor, 'Doctor'];
  if (first === 'access') return [access, 'Access'];
  return [null, 'Not found'];
}

// ---- sign-in and the pages shown instead of the app

function signIn(problem) {
  stopPage();
  machineList.reset();
  statelessNodes.reset();
  document.title = 'Sign in · Rollcall';
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
    'aria-describedby': 'token-help', 'aria-invalid': problem ? 'true' : null,
  });
  const status = h('div', { id: 'signin-status', role: 'alert', class: problem ? 'alert error' : 'hidden' }, problem || '');
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'signin card', method: 'post', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, brand(), 'Sign in'),
    status,
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'Admin token'),
      input,
      h('p', { id: 'token-help', class: 'help' },
        'The token is in the admin.token file of any node\'s data directory (',
        h('code', {}, 'cat var/admin.token'), ' after ', h('code', {}, 'make run'),
        '). It is kept for this tab only.')),
    button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    button.disabled = true;
    button.textContent = 'Signing in…';
    try {
      // An admin route that needs no leader: it answers 401 for a bad token
      // even when the cluster has lost its quorum.
      await get('/api/v1/bmc/drivers', { tok: t });
      token.set(t);
      start();
    } catch (e) {
      button.disabled = false;
      button.textContent = 'Sign in';
      let msg = e.message;
      if (e.status === 401) msg = 'That token was not accepted: it is not this cluster\'s admin token. Check for a missing character or a token from another cluster.';
      status.className = 'alert error';
      status.textContent = msg;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      input.select();
    }
  });
  app.replaceChildren(h('main', { id: 'main', class: 'page center', tabindex: '-1' }, form));
  input.focus();
}

function brand() {
  return h('span', { class: 'brand-mark', 'aria-hidden': 'true' });
}

// noLeader is shown while the node answers but has no leader: nothing can
// be changed and reads may be stale. It tries again by itself, backing off.
function noLeader(hl, err) {
  stopPage();
  document.title = 'No leader · Rollcall';
  const retry = h('button', { type: 'button', class: 'primary', onclick: () => start() }, 'Try again now');
  const detail = hl
    ? [`Node ${hl.node || '?'} answers, but it cannot reach a leader (Raft state ${hl.state || 'unknown'}, applied index ${hl.applied_index ?? '?'}). `,
      'Until a majority of the cluster\'s nodes can talk to each other, machines cannot be changed. Check that the other nodes are running and reachable on their Raft port.']
    : [err?.message || 'The node did not answer.', ' Check that it is running and that this browser can reach it.'];
  app.replaceChildren(h('main', { id: 'main', class: 'page center', tabindex: '-1' },
    h('section', { class: 'card problem', role: 'alert', 'aria-labelledby': 'problem-title' },
      h('h1', { id: 'problem-title' }, hl ? 'This node cannot reach a leader' : 'Cannot reach the node'),
      h('p', {}, detail),
      h('p', { class: 'muted' }, 'This page tries again by itself.'),
      h('div', { class: 'buttons' }, retry, h('button', { type: 'button', onclick: signOut }, 'Sign out')))));
  retry.focus();
  scheduleRetry();
}

let retryTimer = null;
let retryDelay = 2000;
function scheduleRetry() {
  clearTimeout(retryTimer);
  retryTimer = setTimeout(() => start(), retryDelay);
  retryDelay = Math.min(retryDelay * 2, 30000);
}

function signOut() {
  token.clear();
  clearTimeout(retryTimer);
  signIn();
}

// ---- the shell

function shell() {
  const nav = h('nav', { class: 'nav', 'aria-label': 'Main' },
    h('ul', {}, NAV.map(([href, label]) => h('li', {}, h('a', { href }, label)))));
  const hl = h('span', { class: 'health', id: 'health' });
  const skip = h('button', { type: 'button', class: 'skip', onclick: () => document.getElementById('main')?.focus() }, 'Skip to content');
  const header = h('header', { class: 'top' },
    skip,
    h('a', { class: 'brand', href: '#/', 'aria-label': 'Rollcall overview' }, brand(), h('span', {}, 'Rollcall')),
    nav,
    hl,
    h('button', { type: 'button', class: 'signout', onclick: signOut }, 'Sign out'));
  const main = h('main', { id: 'main', class: 'page', tabindex: '-1' });
  app.replaceChildren(header, main);
  showHealth();
  return main;
}

function showHealth() {
  const el = document.getElementById('health');
  if (!el || !health) return;
  el.replaceChildren(
    h('span', { class: `dot ${health.ok ? 'ok' : 'bad'}`, 'aria-hidden': 'true' }),
    h('span', {}, `${health.node}`, h('span', { class: 'sr-only' }, health.ok ? ', healthy' : `, unhealthy: ${health.reason || 'no leader'}`)));
  el.title = `node ${health.node}, leader ${health.leader || 'none'}, applied index ${health.applied_index}`;
}

function stopPage() {
  if (cleanup) { cleanup(); cleanup = null; }
}

function render() {
  if (!token.get()) { signIn(); return; }
  stopPage();
  let main = document.getElementById('main');
  if (!document.querySelector('header.top')) main = shell();
  const r = route();
  for (const a of document.querySelectorAll('.nav a')) {
    const [href, , active] = NAV.find(([x]) => x === a.getAttribute('href'));
    if (active(r.path)) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    void href;
  }
  const [page, title] = pageFor(r);
  document.title = `${title} · Rollcall`;
  main.className = 'page';
  main.replaceChildren();
  if (!page) {
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'There is no page at this address. ', h('a', { href: '#/' }, 'Go to the overview.')));
    return;
  }
  cleanup = page.mount(main, r) || null;
  if (lastPath !== null && lastPath !== r.path) {
    // A new page: move focus to its heading so screen readers start there.
    const h1 = main.querySelector('h1');
    if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); } else main.focus({ preventScroll: true });
    announce(`${title} page`);
  }
  lastPath = r.path;
}
let lastPath = null;

// start checks the node's health and the token (in parallel), then shows
// the app. The machine list, the largest answer and the one the first pages
// need, is requested at the same time.
async function start() {
  clearTimeout(retryTimer);
  if (!token.get() && !(await signInByCertificate())) { signIn(); return; }
  const r0 = route();
  const warm = !r0.parts[0] || (r0.parts[0] === 'machines' && !r0.parts[1]) ? machineList.subscribe(() => {}) : () => {};
  try {
    const [hr, dr] = await Promise.allSettled([get('/api/v1/health', { auth: false }), get('/api/v1/bmc/drivers')]);
    if (hr.status === 'rejected') {
      const e = hr.reason;
      health = e instanceof APIError && e.status === 503 && e.body && 'ok' in e.body ? e.body : null;
      // Unhealthy with a leader (a part failed, the node is catching up or
      // its store is damaged): the pages work and the overview says why.
      if (!health || !health.leader) {
        noLeader(health, e);
        return;
      }
    } else {
      health = hr.value.data;
    }
    if (dr.status === 'rejected') {
      if (dr.reason.status !== 401) noLeader(null, dr.reason); // 401: the handler shows the sign-in page
      return;
    }
    retryDelay = 2000;
    document.querySelector('header.top')?.remove();
    render();
  } finally {
    warm();
  }
}

setUnauthorizedHandler(() => {
  token.clear();
  signIn('The node no longer accepts this token (it was changed, or this is another cluster). Sign in again.');
});

// A page reports a lost leader through this event; the app re-checks.
window.addEventListener('rollcall:unhealthy', () => start());
window.addEventListener('hashchange', () => { if (token.get() && document.querySelector('header.top')) render(); });

start();
