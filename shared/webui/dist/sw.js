// BetCode service worker (built into shared/webui/dist/sw.js by vite.config.ts, which fills in
// the precache list and the version; served unhashed with no-cache).
// - precaches the app shell; navigations fall back to it offline (the app shows
//   "Offline, reconnecting…"); /api is never cached or intercepted;
// - shows push notifications (payload of docs/web-api.md) and answers permission requests
//   from their Allow / Deny actions without opening a window.
/* eslint-env serviceworker */
const VERSION = "2e7d15ac88c8b9e0";
const PRECACHE = ["/","/assets/index-BKg7FFJK.css","/assets/index-OuQsT7j5.js","/icon-192.png","/icon-512.png","/icon.svg","/index.html","/manifest.webmanifest"];
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
  e.waitUntil(self.registration.showNotification(d.title || 'BetCode', opts));
});

async function answer(d, behavior) {
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
    e.waitUntil(
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
  e.waitUntil(focusOrOpen(d.url));
});
