// Deployment faces: the Deploy… and Release… actions (on the machine page
// and as bulk actions of the machines list), and the machine page's panel
// with the current deploy or release job, its live progress (a blocking
// query on /machines/{id}/jobs, which the node answers when any deploy job
// changes) and cancel.
//
// The API has no dry run: the disk the rule chooses is in the deploy
// answer, before anything is written (the machine writes only once it
// network-boots the deploy agent), and the job can be cancelled until then.
// The confirmation names the disk when the operator picked one, else the
// rule; the results line and the panel name the disk chosen.

import { get, post, watch, enc } from './api.js';
import { h, section, dl, diskSize, bytes, when, ago, announce } from './dom.js';
import { ACTIONS, ACTION_ORDER, dialog } from './actions.js';

const path = (m) => `/api/v1/machines/${enc(m.id)}`;
const nameOf = (m) => m.name || m.id;
const lines = (s) => (s || '').split(/[\n,]/).map((x) => x.trim()).filter(Boolean);

// diskLabel names a disk as the inventory saw it: name, size, serial.
export function diskLabel(d) {
  return [d.name, diskSize(d.size_bytes ?? d.size), d.model, d.serial ? `serial ${d.serial}` : null,
    d.transport === 'usb' || d.removable ? 'removable' : null].filter(Boolean).join(' · ');
}

export function jobDisk(j) {
  const d = j.disk || {};
  if (!d.name) return 'no disk yet';
  return [d.name, diskSize(d.size), d.serial ? `serial ${d.serial}` : d.wwn ? `WWN ${d.wwn}` : null].filter(Boolean).join(' · ');
}

const deploy = {
  label: 'Deploy…',
  group: 'lifecycle',
  destructive: true,
  describe: 'deploy an operating system to',
  // prepare builds the fields from the catalog and, for one machine, its
  // inventory's disks.
  prepare: async (machines) => {
    const { data } = await get('/api/v1/os');
    const options = [];
    for (const im of data.images || []) {
      if (im.current) options.push([`${im.name}@`, `${im.name} (current: ${im.current})`]);
      for (const v of [...(im.versions || [])].reverse()) options.push([`${im.name}@${v.version}`, `${im.name} ${v.version}`]);
    }
    if (!options.length) throw new Error('The OS catalog is empty: sync or import an image first (OS images page).');
    let disks = [];
    if (machines.length === 1) {
      const d = await get(path(machines[0]));
      disks = d.data.inventory?.disks || [];
    }
    const one = machines.length === 1;
    return {
      fields: [
        { name: 'os', label: 'Operating system and version', type: 'select', value: options[0][0], options },
        one && disks.length
          ? { name: 'disk', label: 'Disk to overwrite', type: 'select', value: '',
            options: [['', 'Automatic: the smallest non-removable, writable disk that fits'], ...disks.map((d) => [d.serial || d.wwn || d.name, diskLabel(d)])] }
          : { name: 'disk', label: 'Disk (name, serial, WWN or by-path; empty: automatic)', value: '' },
        one ? { name: 'hostname', label: 'Hostname (empty: the machine\'s name)', value: '' } : null,
        { name: 'upgrade', label: 'Upgrade packages on first boot', type: 'checkbox' },
        { name: 'packages', label: 'Packages to install (comma-separated)', value: '' },
        { name: 'ssh_keys', label: 'SSH public keys (one a line)', type: 'textarea', value: '' },
        { name: 'user_data', label: 'Your own user-data (#cloud-config, #! or MIME)', type: 'textarea', value: '' },
        { name: 'boot', label: 'Now: power-cycle into the deploy agent through the BMC', type: 'checkbox',
          help: 'Without this, the machine deploys the next time it network-boots.' },
      ].filter(Boolean),
      disks,
    };
  },
  // confirm asks a second time, naming what is overwritten.
  confirm: async (values, machines, prep) => {
    const [os, version] = values.os.split('@');
    const chosen = (prep.disks || []).find((d) => values.disk && [d.serial, d.wwn, d.name].includes(values.disk));
    const one = machines.length === 1;
    const target = values.disk
      ? `disk ${chosen ? diskLabel(chosen) : values.disk}`
      : 'the disk the rule chooses (the smallest non-removable, writable disk that fits the image; never a USB stick)';
    const ok = await dialog({
      title: `Overwrite a disk of ${one ? nameOf(machines[0]) : `${machines.length} machines`}?`,
      body: [
        h('p', { class: 'warn confirm-disk' }, `Everything on ${target} of ${one ? nameOf(machines[0]) : `each of ${machines.length} machines`} is overwritten with ${os} ${version || '(current)'}.`),
        values.disk ? null : h('p', {}, 'The disk chosen is shown in the job as soon as it is made, before anything is written; cancel the job there if it is the wrong one.'),
      ],
      confirm: 'Deploy', danger: true,
    });
    return ok ? values : null;
  },
  run: async (m, v) => {
    const [os, version] = v.os.split('@');
    const req = { os, version: version || undefined, disk: v.disk || undefined, hostname: v.hostname || undefined,
      upgrade: v.upgrade, packages: lines(v.packages), ssh_keys: (v.ssh_keys || '').split('\n').map((x) => x.trim()).filter(Boolean),
      user_data: v.user_data || undefined, boot: v.boot };
    const { data: j } = await post(`${path(m)}/deploy`, req);
    return { ok: true, text: `job ${j.id}: ${j.os} ${j.os_version} onto ${jobDisk(j)}${j.disk?.rule ? ` (${j.disk.rule})` : ''}` };
  },
};

const release = {
  label: 'Release…',
  group: 'lifecycle',
  destructive: true,
  describe: 'wipe the deployed disk of',
  detail: 'It boots the deploy agent, wipes the disk it was deployed to, and goes back to ready with its addresses freed.',
  warn: 'The installed system and its data are destroyed.',
  fields: [
    { name: 'wipe', label: 'Wipe', type: 'select', value: 'quick',
      options: [['quick', 'Quick: signatures and partition tables at both ends'], ['full', 'Full: every block (slow)']] },
    { name: 'boot', label: 'Now: power-cycle into the deploy agent through the BMC', type: 'checkbox' },
  ],
  confirmLabel: 'Release',
  run: async (m, v) => {
    const { data: j } = await post(`${path(m)}/release`, { wipe: v.wipe, boot: v.boot });
    return { ok: true, text: `job ${j.id}: ${j.wipe || 'quick'} wipe of ${jobDisk(j)}` };
  },
};

// registerActions adds Deploy… and Release… to the machine actions, before
// Re-commission.
export function registerActions() {
  if (ACTIONS.deploy) return;
  ACTIONS.deploy = deploy;
  ACTIONS.release = release;
  const at = ACTION_ORDER.indexOf('recommission');
  ACTION_ORDER.splice(at < 0 ? ACTION_ORDER.length : at, 0, 'deploy', 'release');
}

const ACTIVE = new Set(['queued', 'running']);

// panel is the machine page's deployment card: the newest deploy or
// release job, followed live.
export function panel(machineID, signal) {
  const el = h('div', { class: 'deploy-slot' });
  let shown = null;
  watch(`/api/v1/machines/${enc(machineID)}/jobs`, (d) => {
    const j = (d.deploy || [])[0];
    if (!j) { el.replaceChildren(); return; }
    if (shown && shown.state !== j.state) announce(`${j.kind} job ${j.id}: ${j.state}`);
    shown = j;
    el.replaceChildren(card(machineID, j));
  }, { signal, onError: () => {} });
  return el;
}

function card(machineID, j) {
  const p = j.progress || {};
  const pct = p.total ? Math.min(100, Math.round((100 * (p.bytes || 0)) / p.total)) : null;
  const cancelBtn = ACTIVE.has(j.state) ? h('button', { type: 'button', class: 'act danger-text', onclick: () => cancel(machineID, j) }, 'Cancel job') : null;
  const c = section(j.kind === 'release' ? 'Release' : 'Deployment',
    dl([
      ['Job', h('span', {}, h('code', {}, j.id), ' ', h('span', { class: `badge job-${j.state}` }, j.state))],
      ['OS', j.os ? `${j.os} ${j.os_version}` : null],
      ['Disk', `${jobDisk(j)}${j.disk?.rule ? ` (${j.disk.rule})` : ''}`],
      ['Wipe', j.wipe],
      ['Hostname', j.fqdn || j.hostname],
      ['Addresses', (j.addresses || []).map((a) => `${a.ip} (${a.subnet})`).join(', ')],
      ['Step', p.step ? h('span', { class: 'job-step' }, `${p.step} ${p.state || ''}`,
        p.total ? [' ', h('progress', { max: 100, value: pct, 'aria-label': `${p.step}: ${pct}%` }), ` ${pct}% · ${bytes(p.bytes)} of ${bytes(p.total)}`] : null) : 'waiting for the machine to boot the deploy agent'],
      ['Last report', p.updated ? ago(p.updated) : null],
      ['Error', j.error ? h('span', { class: 'bad' }, j.error) : null],
      ['Cancel', j.cancel ? 'requested: the agent wipes the disk and fails' : null],
      ['Created', when(j.created)],
      ['Finished', j.finished ? when(j.finished) : null],
      ['Phoned home', j.phoned_home ? `${when(j.phoned_home)}${j.phone_host ? ` as ${j.phone_host}` : ''}` : null],
    ]),
    (j.steps || []).length ? h('ol', { class: 'steps', 'aria-label': 'Steps' }, j.steps.map((s) => h('li', { class: s.state === 'failed' ? 'fail' : null },
      h('strong', {}, s.step), ` ${s.state}`, s.message ? ` · ${s.message}` : ''))) : null,
    cancelBtn ? h('div', { class: 'actionbar' }, cancelBtn) : null);
  c.id = 'deployment';
  c.dataset.job = j.id;
  c.dataset.state = j.state;
  return c;
}

async function cancel(machineID, j) {
  const started = j.state === 'running';
  const ok = await dialog({
    title: `Cancel job ${j.id}?`,
    body: [h('p', {}, started
      ? 'It has started: the agent stops, wipes the disk (so nothing half-written stays) and the job fails.'
      : 'Nothing has been written yet: the job ends now and the machine goes back.')],
    confirm: 'Cancel the job', danger: true,
  });
  if (!ok) return;
  try {
    await post(`/api/v1/machines/${enc(machineID)}/jobs/cancel`);
    announce(`Job ${j.id} cancelled.`);
  } catch (e) {
    announce(`Cancel failed: ${e.message}`);
  }
}

