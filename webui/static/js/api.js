// The REST API client. The admin token lives in sessionStorage (this tab
// only, gone when it closes) and travels in the Authorization header, never
// in a URL. Errors arrive as {"error":{"code","message"}} and become
// APIError with the status, the code and the node's message.

const TOKEN_KEY = 'rollcall.admin-token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || '',
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

// CERTIFICATE stands in for the token when the browser signed in with an
// administrator's client certificate (rollcall admin-cert request, the
// .p12 imported): requests then carry no Authorization header, and the
// browser presents the certificate in the TLS handshake.
export const CERTIFICATE = '@certificate';

// signInByCertificate asks the node who it takes this browser for, with no
// token: over HTTPS with an administrator's certificate the answer is
// admin:NAME, and the app needs no sign-in. It returns the actor or ''.
export async function signInByCertificate() {
  if (location.protocol !== 'https:') return '';
  try {
    const res = await fetch('/api/v1/whoami', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' });
    if (!res.ok) return '';
    const who = await res.json();
    if (who.via !== 'certificate') return '';
    token.set(CERTIFICATE);
    return who.actor;
  } catch {
    return '';
  }
}

export class APIError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.name = 'APIError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

// Whoever needs to know that the token stopped working (the app shows the
// sign-in page) sets this.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// request calls the API and returns {data, index, status}. index is the
// X-Rollcall-Index header (or the body's index), 0 when absent.
// With type, body is sent as it is under that Content-Type (a CSV file).
export async function request(method, path, body, { signal, auth = true, tok, type } = {}) {
  const headers = { Accept: 'application/json' };
  const t = tok ?? token.get();
  const byCert = t === CERTIFICATE;
  if (auth && t && !byCert) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers['Content-Type'] = type || 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, signal, cache: 'no-store', credentials: byCert ? 'same-origin' : 'omit',
      body: body === undefined ? undefined : (type ? body : JSON.stringify(body)),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError(0, 'unreachable', 'The node did not answer (network error). Is it running?');
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok && res.status !== 202) {
    const e = data && data.error ? data.error : {};
    const err = new APIError(res.status, e.code || `http_${res.status}`, e.message || `${res.status} ${res.statusText}`, data);
    if (res.status === 401 && auth && tok === undefined) onUnauthorized(err);
    throw err;
  }
  const index = Number(res.headers.get('X-Rollcall-Index') || (data && data.index) || 0);
  return { data, index, status: res.status };
}

export const get = (path, opts) => request('GET', path, undefined, opts);
export const post = (path, body, opts) => request('POST', path, body, opts);
export const put = (path, body, opts) => request('PUT', path, body, opts);
export const patch = (path, body, opts) => request('PATCH', path, body, opts);
export const del = (path, opts) => request('DELETE', path, undefined, opts);

export const enc = encodeURIComponent;

// hasRoute says whether this node serves a route (method, OpenAPI path
// such as /api/v1/machines/{id}), from its OpenAPI document, read once. A
// page offers a form only for what the node can do: during a rolling
// upgrade an older node lacks the newer routes.
let routes = null;
export async function hasRoute(method, path) {
  if (!routes) {
    routes = get('/api/v1/openapi.json', { auth: false }).then((r) => r.data?.paths || {}, () => null);
  }
  const paths = await routes;
  if (!paths) return true; // no document: try, and show what the node says
  return !!paths[path]?.[method.toLowerCase()];
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// watch follows a list through blocking queries: it fetches path, then asks
// again with ?index=<last>&wait=30s, which the node answers only when the
// list changed (or after 30 s with the same index). onData runs for the
// first answer and for every change. There is no timer: the node decides
// when to answer. Two things only space requests out: after a change, the
// next query starts no sooner than twice the time the last one took to
// fetch and handle (so a 10,000-machine list during a commissioning storm
// does not hog the tab), and after an error, a backoff from 1 s to 30 s.
// With every, onData also runs for an answer with the same index: a list
// whose entries age without a write (a stateless node turns stale when its
// heartbeats stop) is read afresh at least every 30 s.
export function watch(path, onData, { signal, onError, onRecover, from = null, every = false } = {}) {
  const sep = path.includes('?') ? '&' : '?';
  let index = from;
  let backoff = 1000;
  let failing = false;
  (async () => {
    while (!signal?.aborted) {
      const t0 = performance.now();
      try {
        const url = index === null ? path : `${path}${sep}index=${index}&wait=30s`;
        const r = await get(url, { signal });
        if (failing) { failing = false; onRecover?.(); }
        backoff = 1000;
        if (index === null || r.index !== index) {
          index = r.index;
          onData(r.data, r.index);
          const spent = performance.now() - t0;
          await sleep(Math.min(Math.max(250, 2 * spent), 10000), signal);
        } else {
          if (every) onData(r.data, r.index);
          if (performance.now() - t0 < 1000) {
            // The same index at once: a list that does not block (or has no
            // index). Ask again a little later rather than in a tight loop.
            await sleep(5000, signal);
          }
        }
      } catch (e) {
        if (signal?.aborted || e.name === 'AbortError') return;
        failing = true;
        onError?.(e);
        if (e.status === 401) return;
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 30000);
      }
    }
  })();
}

// Live keeps one list followed for every page that shows it, so moving
// between pages does not fetch 10,000 machines again. It follows while
// anyone listens and keeps the last answer when no one does.
export class Live {
  constructor(path, { every = false } = {}) {
    this.path = path;
    this.every = every;
    this.data = null;
    this.index = 0;
    this.error = null;
    this.listeners = new Set();
    this.ctrl = null;
  }

  subscribe(fn) {
    this.listeners.add(fn);
    if (this.data || this.error) fn(this.data, this.error);
    if (!this.ctrl) this.start();
    return () => {
      this.listeners.delete(fn);
      if (!this.listeners.size) this.stop();
    };
  }

  start() {
    this.ctrl = new AbortController();
    const emit = () => { for (const fn of this.listeners) fn(this.data, this.error); };
    watch(this.path, (data, index) => {
      this.data = data;
      this.index = index;
      this.error = null;
      emit();
    }, {
      signal: this.ctrl.signal,
      onError: (e) => { this.error = e; emit(); },
      onRecover: () => { this.error = null; emit(); },
      from: this.data ? this.index : null,
      every: this.every,
    });
  }

  stop() {
    this.ctrl?.abort();
    this.ctrl = null;
  }

  reset() {
    this.stop();
    this.data = null;
    this.error = null;
    this.index = 0;
  }
}

// The lists several pages share.
export const machines = new Live('/api/v1/machines');
// The stateless nodes, by machine: read afresh every 30 s as well, since a
// node turns stale without a write.
export const statelessNodes = new Live('/api/v1/stateless/nodes', { every: true });
