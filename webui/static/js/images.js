// Boot images with their files and the nodes holding a verified copy.

import { watch, enc } from './api.js';
import { h, section, table, empty, bytes, when, errorBox } from './dom.js';

export function mount(main) {
  const ctrl = new AbortController();
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Images')),
    h('p', { class: 'muted' }, 'The images machines boot: the commissioning image and any others. Import one with ',
      h('code', {}, 'rollcall image import NAME DIR'), '; every node fetches and verifies its own copy.'),
    section('Boot images', box));
  watch('/api/v1/images', (d) => {
    const list = d.images || [];
    box.replaceChildren(list.length ? table('Boot images', [
      { label: 'Image', get: (im) => im.name },
      { label: 'Files', get: (im) => h('ul', { class: 'plain' }, (im.files || []).map((f) => h('li', {},
        h('a', { href: `/images/${enc(im.name)}/${enc(f.name)}`, download: '' }, f.name), ` · ${bytes(f.size)} · `,
        h('code', { title: f.sha256 }, `sha256 ${f.sha256.slice(0, 12)}…`)))) },
      { label: 'Held by', get: (im) => (im.nodes?.length ? im.nodes.join(', ') : h('span', { class: 'bad' }, 'no node yet')) },
      { label: 'Created', get: (im) => when(im.created) },
    ], list) : empty('No images yet.'));
  }, { signal: ctrl.signal, onError: (e) => { if (e.status !== 401) box.replaceChildren(errorBox(e)); } });
  return () => ctrl.abort();
}
