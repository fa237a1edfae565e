// inbox-perf.mjs: the inbox's render time on data alone, with no relay nor machine: the built app
// (shared/webui/dist) served by a tiny static server whose /api/info says "relay", a device with
// two (unreachable) pairings, so the inbox is the home, and then 20 machines × 50 sessions, each
// with a waiting permission prompt, fed to the inbox through its benchmark hook
// (window.betcodeInboxFeed) on a CPU throttled 4× (Emulation.setCPUThrottlingRate): the time
// from the data to the DOM (a MutationObserver sees the newest prompt) and to the next frame.
// Budget (issue 24): ≤ 100 ms. Run: make web && cd web/e2e && node inbox-perf.mjs
// (docs/benchmarks.md). Without a Go test: params from BETCODE_E2E ({"runs": 5}).
import { createServer } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { join, extname, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'shared', 'webui', 'dist');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.svg': 'image/svg+xml', '.png': 'image/png', '.webmanifest': 'application/manifest+json' };
const server = createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/api/info') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.end(JSON.stringify({ role: 'relay', version: 'bench', push: false, oidc: false }));
  }
  if (u.pathname.startsWith('/api')) {
    res.writeHead(404, { 'Content-Type': 'application/json' });
    return res.end('{"error":"not here","code":"NOT_FOUND"}');
  }
  const f = join(dist, u.pathname === '/' ? 'index.html' : u.pathname);
  if (!f.startsWith(dist) || !existsSync(f)) {
    res.writeHead(404);
    return res.end();
  }
  res.writeHead(200, { 'Content-Type': types[extname(f)] || 'application/octet-stream' });
  res.end(readFileSync(f));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
process.env.BETCODE_BASE_URL ||= `http://127.0.0.1:${server.address().port}/`;

const { launch, log, main, params } = await import('./lib/harness.mjs');
const { tid } = await import('./lib/app.mjs');
const { measureInbox } = await import('./lib/inboxperf.mjs');

await main(async () => {
  const ctx = await launch();
  const page = await ctx.newPage();
  const base = process.env.BETCODE_BASE_URL;
  await page.goto(base + '#/pair', { waitUntil: 'domcontentloaded' });
  // Two pairings the app cannot reach (no relay here): enough for the inbox to be the home.
  await page.evaluate(async () => {
    const db = await new Promise((res, rej) => {
      const r = indexedDB.open('betcode', 1);
      r.onupgradeneeded = () => r.result.createObjectStore('kv');
      r.onsuccess = () => res(r.result);
      r.onerror = () => rej(r.error);
    });
    const p = (i) => ({ machineId: `m${i}`, machineName: `Machine ${i}`, relay: 'nowhere:1', machineKey: btoa(String.fromCharCode(...new Uint8Array(32).fill(i + 1))), fingerprint: 'x', token: 't', deviceId: 'd', pairedAt: new Date().toISOString() });
    await new Promise((res, rej) => {
      const tx = db.transaction('kv', 'readwrite');
      tx.objectStore('kv').put([p(1), p(2)], 'pairings');
      tx.oncomplete = res;
      tx.onerror = () => rej(tx.error);
    });
    db.close();
  });
  await page.goto(base, { waitUntil: 'domcontentloaded' });
  await page.reload({ waitUntil: 'domcontentloaded' });
  await page.locator(tid('inbox')).waitFor();
  let prof;
  if (params.profile) {
    prof = await ctx.newCDPSession(page);
    await prof.send('Profiler.enable');
    await prof.send('Profiler.setSamplingInterval', { interval: 100 });
    await prof.send('Profiler.start');
  }
  const perf = await measureInbox(ctx, page, Number(params.runs || 5), Number(params.rate || 4));
  if (prof) {
    const { profile } = await prof.send('Profiler.stop');
    const self = new Map();
    const dt = new Map();
    profile.samples.forEach((id, i) => dt.set(id, (dt.get(id) || 0) + (profile.timeDeltas[i] || 0)));
    for (const n of profile.nodes) {
      const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').pop()}:${n.callFrame.lineNumber}:${n.callFrame.columnNumber}`;
      self.set(k, (self.get(k) || 0) + (dt.get(n.id) || 0) / 1000);
    }
    perf.profile = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([k, ms]) => `${ms.toFixed(0)} ms ${k}`);
  }
  log('inbox render (4× CPU throttle)', perf);
  await ctx.closeAll();
  server.close();
  return perf;
});
