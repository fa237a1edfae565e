// BetCode service worker (bundled into one classic script, shared/webui/dist/sw.js, by
// vite.config.ts, which fills in the precache list and the version; served unhashed with no-cache).
// - precaches the app shell; navigations fall back to it offline (the app shows
//   "Offline, reconnecting…"); /api is never cached or intercepted;
// - shows push notifications (payload of docs/web-api.md) and answers permission requests
//   from their Allow / Deny actions without opening a window: for a machine this device paired
//   with, as a sealed envelope (docs/e2ee-wire.md §3, the seal code of src/e2ee bundled in);
//   else (the relay's own watcher, a machine reached through the relay login) as before.
/* eslint-env serviceworker */
import { base64 } from '../src/e2ee/code';
import { sealedPayload } from '../src/e2ee/payload';
import { seal } from '../src/e2ee/seal';

const VERSION = '__VERSION__';
const PRECACHE = __PRECACHE__;
const CACHE = 'betcode-shell-' + VERSION;

self.addEventListener('install', (e) => {
  e.waitUntil(
    caches
      .open(CACHE)
      .then((c) => c.addAll(PRECACHE.map((p) => new Request(p, { cache: 'reload' }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (e) => {
  e.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k.startsWith('betcode-shell-') && k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener('fetch', (e) => {
  const req = e.request;
  if (req.method !== 'GET') return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin || url.pathname.startsWith('/api/') || url.pathname === '/api') return;
  if (req.mode === 'navigate') {
    // Network first so a deploy shows at once; the cached shell when offline.
    e.respondWith(fetch(req).catch(() => caches.match('/index.html', { cacheName: CACHE }).then((r) => r || Response.error())));
    return;
  }
  if (url.pathname === '/sw.js') return;
  e.respondWith(
    caches.match(req, { cacheName: CACHE }).then((hit) => hit || fetch(req)),
  );
});

// ---------------------------------------------------------------- IndexedDB (same as src/idb.ts)

function idbGet(key) {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open('betcode', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('kv');
    r.onerror = () => reject(r.error);
    r.onsuccess = () => {
      const tx = r.result.transaction('kv', 'readonly');
      const g = tx.objectStore('kv').get(key);
      g.onsuccess = () => resolve(g.result);
      g.onerror = () => reject(g.error);
    };
  });
}

// ---------------------------------------------------------------- push

self.addEventListener('push', (e) => {
  let d = {};
  try {
    d = e.data ? e.data.json() : {};
  } catch {
    d = { title: 'BetCode', body: e.data ? e.data.text() : '' };
  }
  if (d.type === 'resolved') {
    wait(e, closeResolved(d.tag));
    return;
  }
  const opts = {
    body: d.body || '',
    tag: d.tag || undefined,
    data: d,
    icon: '/icon-192.png',
    badge: '/icon-192.png',
    renotify: !!d.tag,
    requireInteraction: d.type === 'permission_request' || d.type === 'question',
  };
  if (d.type === 'permission_request' && d.sessionId && d.requestId) {
    opts.actions = [
      { action: 'allow', title: 'Allow' },
      { action: 'deny', title: 'Deny' },
    ];
  }
  wait(e, self.registration.showNotification(d.title || 'BetCode', opts));
});

/**
 * A prompt was resolved (answered on another device, by a rule, by its timeout, or withdrawn with
 * its turn): its notification (and the error notification of a failed answer from it) is closed,
 * and nothing is shown. Chrome subscribes with userVisibleOnly: a push that leaves no notification
 * while no BetCode page is visible uses up a small budget of silent pushes, after which Chrome shows
 * its own "This site has been updated in the background" instead (docs/web-api.md, "Push
 * notifications"). Showing a notification here to avoid that would defeat the point, so this
 * shows none.
 */
async function closeResolved(tag) {
  if (!tag) return;
  const shown = await self.registration.getNotifications();
  for (const n of shown) if (n.tag === tag || n.tag === tag + '/result') n.close();
}

/** waitUntil, which an event dispatched by script (a test's notificationclick) does not allow. */
function wait(e, p) {
  try {
    e.waitUntil(p);
  } catch {
    /* not a trusted event: p runs all the same */
  }
  return p;
}

function randomHex() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Answers as a paired device: a sealed permission envelope to POST /api/sealed with the device token. */
async function answerSealed(p, d, behavior) {
  const key = await idbGet('device-key').catch(() => undefined);
  if (!key || !key.publicKey) return 'This device has lost its key: open the app and pair again';
  let sealed;
  try {
    const payload = sealedPayload('permission', { session_id: d.sessionId, request_id: d.requestId, behavior });
    sealed = await seal(key, p.machineId, p.machineKey, payload);
  } catch {
    return 'Could not encrypt the answer: open the app to answer';
  }
  let res;
  try {
    res = await fetch('/api/sealed', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + p.token },
      body: JSON.stringify({ machine: p.machineId, sealed: base64(sealed), idempotency_key: randomHex() }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    return 'Could not reach BetCode: open the app to answer';
  }
  if (res.ok) {
    const a = await res.json().catch(() => ({}));
    if (a.buffered) return 'The machine is offline: it gets the answer when it is back';
    return a.accepted === false ? 'The machine did not take the answer: open the app' : '';
  }
  if (res.status === 401 || res.status === 403) return 'This device may no longer reach the machine: open the app';
  if (res.status === 503) return 'The machine is offline';
  return 'Could not answer (' + res.status + ')';
}

async function answer(d, behavior) {
  const pairings = d.machineId ? await idbGet('pairings').catch(() => undefined) : undefined;
  const p = Array.isArray(pairings) ? pairings.find((x) => x && x.machineId === d.machineId) : undefined;
  if (p) return answerSealed(p, d, behavior);
  const token = await idbGet('token').catch(() => undefined);
  if (!token) return 'Log in to BetCode to answer';
  const headers = { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token };
  if (d.machineId) headers['X-Betcode-Machine'] = d.machineId;
  let res;
  try {
    res = await fetch(
      '/api/sessions/' + encodeURIComponent(d.sessionId) + '/permissions/' + encodeURIComponent(d.requestId),
      { method: 'POST', headers, body: JSON.stringify({ behavior }), credentials: 'omit', cache: 'no-store' },
    );
  } catch {
    return 'Could not reach BetCode: open the app to answer';
  }
  if (res.ok) return '';
  if (res.status === 409) return 'Already answered (or timed out)';
  if (res.status === 401) return 'Your BetCode login expired: open the app';
  if (res.status === 503) return 'The machine is offline';
  return 'Could not answer (' + res.status + ')';
}

async function focusOrOpen(url) {
  const target = new URL(url || '/', self.location.origin).href;
  const wins = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  for (const w of wins) {
    if (new URL(w.url).origin === self.location.origin) {
      await w.focus();
      if (w.url !== target && 'navigate' in w) await w.navigate(target).catch(() => {});
      return;
    }
  }
  await self.clients.openWindow(target);
}

self.addEventListener('notificationclick', (e) => {
  const n = e.notification;
  const d = n.data || {};
  n.close();
  if (e.action === 'allow' || e.action === 'deny') {
    wait(
      e,
      answer(d, e.action).then((err) => {
        if (!err) return;
        return self.registration.showNotification(d.title || 'BetCode', {
          body: err,
          tag: (d.tag || 'betcode') + '/result',
          data: d,
          icon: '/icon-192.png',
        });
      }),
    );
    return;
  }
  wait(e, focusOrOpen(d.url));
});
