// The OS image catalog: every name with its track and current version, the
// versions with their sizes, hashes, import time and the nodes holding a
// copy; promote, remove, and "Sync now", which shows the node's streamed
// progress lines (POST /api/v1/os/sync answers NDJSON) as they arrive.

import { watch, post, del, enc, token, APIError, CERTIFICATE } from './api.js';
import { h, section, table, empty, bytes, when, errorBox, announce } from './dom.js';
import { dialog } from './actions.js';

export function mount(main) {
  const ctrl = new AbortController();
  let last = null;
  const syncBtn = h('button', { type: 'button', class: 'primary sync-now', onclick: () => sync() }, 'Sync now');
  const syncState = h('p', { class: 'muted sync-state' });
  const log = h('ol', { class: 'sync-log', role: 'log', 'aria-live': 'polite', 'aria-label': 'Sync progress' });
  const notice = h('div', { class: 'notice-slot' });
  const box = h('div', { class: 'stack' }, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'OS images')),
    h('p', { class: 'muted' }, 'The operating systems machines are deployed with. Sync fetches the configured os_sources; import one with ',
      h('code', {}, 'rollcall os import NAME FILE'), '. Every node holds a verified copy of each version.'),
    section('Sync', h('div', { class: 'actionbar' }, syncBtn), syncState, log),
    notice, box);

  function draw(d) {
    last = d;
    const images = d.images || [];
    const s = d.sync || {};
    syncBtn.disabled = !(d.sources || []).length || s.running;
    syncState.replaceChildren(...syncSummary(d));
    box.replaceChildren(...(images.length ? images.map((im) => imageCard(im, d.nodes || 1))
      : [empty('No OS images yet. Sync the os_sources or import an image.')]));
  }

  function imageCard(im, nodes) {
    const versions = [...(im.versions || [])].reverse(); // newest first
    const card = section(im.name,
      h('p', { class: 'muted' }, [im.family ? `family ${im.family}` : null, `track ${im.track || 'latest'}`,
        im.current ? `current ${im.current}` : 'no current version'].filter(Boolean).join(' · ')),
      versions.length ? table(`Versions of ${im.name}, newest first`, [
        { label: 'Version', get: (v) => h('span', {}, v.version, v.current ? [' ', h('span', { class: 'badge ok' }, 'current')] : null) },
        { label: 'Size', get: (v) => h('span', { title: `${v.size} bytes compressed, ${v.raw_size} bytes raw` }, `${bytes(v.size)} (raw ${bytes(v.raw_size)})`) },
        { label: 'SHA-256', get: (v) => h('ul', { class: 'plain' },
          h('li', {}, 'file ', h('code', { title: v.sha256 }, `${v.sha256.slice(0, 12)}…`)),
          h('li', {}, 'raw ', h('code', { title: v.raw_sha256 }, `${(v.raw_sha256 || '').slice(0, 12)}…`)),
          v.upstream ? h('li', {}, 'upstream ', h('code', { title: v.upstream }, `${v.upstream.slice(0, 19)}…`)) : null) },
        { label: 'Imported', get: (v) => when(v.imported) },
        { label: 'Held by', get: (v) => {
          const n = (v.nodes || []).length;
          return h('span', { class: n >= nodes ? null : 'bad', title: (v.nodes || []).join(', ') || 'no node yet' }, `${n} of ${nodes} nodes`);
        } },
        { label: 'Actions', get: (v) => h('span', { class: 'row-actions' },
          v.current ? null : h('button', { type: 'button', class: 'act', dataset: { promote: v.version }, onclick: () => promote(im, v) }, 'Promote'),
          h('button', { type: 'button', class: 'act danger-text', dataset: { remove: v.version }, onclick: () => remove(im, v) }, 'Remove')) },
      ], versions) : empty('No versions.'));
    card.dataset.os = im.name;
    return card;
  }

  async function promote(im, v) {
    const ok = await dialog({
      title: `Promote ${im.name} ${v.version}`,
      body: [h('p', {}, `New deployments of ${im.name} use ${v.version} instead of ${im.current || 'nothing'}.`),
        im.track === 'pinned' ? null : h('p', { class: 'warn' }, 'The track is latest: the next sync that finds a newer version makes that current again.')],
      confirm: 'Promote',
    });
    if (!ok) return;
    act(() => post(`/api/v1/os/${enc(im.name)}/promote`, { version: v.version }), `${im.name} ${v.version} is current.`);
  }

  async function remove(im, v) {
    const ok = await dialog({
      title: `Remove ${im.name} ${v.version}`,
      body: [h('p', {}, `The version and its file are removed from every node. A version a job uses is refused.`),
        h('p', { class: 'warn' }, 'This cannot be undone.')],
      confirm: 'Remove', danger: true,
    });
    if (!ok) return;
    act(() => del(`/api/v1/os/${enc(im.name)}/${enc(v.version)}`), `${im.name} ${v.version} removed.`);
  }

  async function act(fn, done) {
    notice.replaceChildren();
    try {
      await fn();
      announce(done);
      notice.replaceChildren(h('div', { class: 'alert', role: 'status' }, done));
    } catch (e) {
      notice.replaceChildren(h('div', { class: 'alert error', role: 'alert' }, e.message));
    }
  }

  async function sync() {
    syncBtn.disabled = true;
    log.replaceChildren();
    announce('Sync started.');
    try {
      await stream('/api/v1/os/sync', {}, (line) => {
        if (line.progress) log.append(h('li', { class: `state-${line.progress.state || 'running'}` }, progressText(line.progress)));
        if (line.result) {
          for (const r of line.result.sync || []) log.append(h('li', { class: r.action === 'failed' ? 'fail' : 'ok' }, resultText(r)));
        }
        if (line.error) log.append(h('li', { class: 'fail' }, `failed: ${line.error.message}`));
      }, ctrl.signal);
      announce('Sync finished.');
    } catch (e) {
      if (e.name === 'AbortError') return;
      log.append(h('li', { class: 'fail' }, `failed: ${e.message}`));
    } finally {
      if (last) draw(last);
    }
  }

  watch('/api/v1/os', draw, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); } });
  return () => ctrl.abort();
}

function syncSummary(d) {
  const s = d.sync || {};
  const out = [];
  if (!(d.sources || []).length) out.push('No os_sources are configured: sync has nothing to fetch.');
  else out.push(`Sources: ${d.sources.join(', ')}. `);
  if (s.running) out.push(`A sync is running on ${s.node || 'a node'} since ${when(s.started)}. `);
  if (s.finished) out.push(`Last sync finished ${when(s.finished)}${s.error ? ` with an error: ${s.error}` : ''}${(s.result || []).length ? `: ${s.result.join('; ')}` : ''}.`);
  return out;
}

export function progressText(p) {
  let t = `${p.name ? `${p.name}: ` : ''}${p.step}${p.state ? ` ${p.state}` : ''}`;
  if (p.total) t += p.step === 'replicate' ? ` ${p.bytes} of ${p.total} nodes` : ` ${bytes(p.bytes)} of ${bytes(p.total)}`;
  else if (p.bytes) t += ` ${bytes(p.bytes)}`;
  if (p.message) t += ` (${p.message})`;
  return t;
}

function resultText(r) {
  let t = `${r.name}: ${r.action}${r.version ? ` ${r.version}` : ''}${r.current ? ', now current' : ''}`;
  if ((r.pruned || []).length) t += `; pruned ${r.pruned.join(', ')}`;
  if (r.message) t += ` (${r.message})`;
  return t;
}

// stream POSTs body and calls onLine with each NDJSON line of the answer as
// it arrives. A refusal before the work started is a plain error answer.
async function stream(path, body, onLine, signal) {
  const byCert = token.get() === CERTIFICATE;
  const headers = { Accept: 'application/x-ndjson', 'Content-Type': 'application/json' };
  if (!byCert) headers.Authorization = `Bearer ${token.get()}`;
  const res = await fetch(path, {
    method: 'POST', signal, cache: 'no-store', credentials: byCert ? 'same-origin' : 'omit', headers,
    body: JSON.stringify(body),
  });
  if (!res.ok) {
    let e = {};
    try { e = (await res.json()).error || {}; } catch { /* not JSON */ }
    throw new APIError(res.status, e.code || `http_${res.status}`, e.message || `${res.status} ${res.statusText}`);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(JSON.parse(line));
    }
    if (done) break;
  }
  if (buf.trim()) onLine(JSON.parse(buf));
}
