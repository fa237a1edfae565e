// Pairing a phone by scanning the machine's QR code, then a conversation end to end: the relay's
// home with nothing paired is "Pair a machine"; the camera (chromium's fake camera playing a Y4M
// video of the QR code of params.code) reads the code; the app pairs and opens the machine's
// sessions through its end-to-end channel; a session's tool asks permission, and the answer
// comes from the notification's Allow action (the service worker's sealed envelope to
// POST /api/sealed), or from the page if that fails (result.answeredFrom says which).
// Every /api request and WebSocket of the pages and the service worker is reported, for the Go
// test to check that no machine call reached the relay in clear.
//
// params: code (betcode-pair:1:…), machineId, deviceName, cwd, prompt, want (the reply after the
// tool ran), title (the notification's title).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseURL, launch, log, main, params, phone, recordAlerts, watch } from './lib/harness.mjs';
import { newSession, norm, texts, tid, waitLastAssistant } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';
import { writeQRVideo } from './lib/qrvideo.mjs';

const tall = { height: 2400 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

await main(async () => {
  const result = { steps: [] };
  const dir = mkdtempSync(join(tmpdir(), 'betcode-qr-'));
  const video = join(dir, 'qr.y4m');
  result.qr = writeQRVideo(video, params.code);
  log('QR video written', result.qr);
  const ctx = await launch({
    viewport: phone,
    args: ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-video-capture=${video}`],
  });
  const origin = new URL(baseURL).origin;
  await ctx.grantPermissions(['camera', 'notifications'], { origin });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  const requests = [];
  ctx.on('request', (r) => {
    const u = new URL(r.url());
    if (u.origin === origin && u.pathname.startsWith('/api')) requests.push(`${r.method()} ${u.pathname}${r.serviceWorker() ? ' (service worker)' : ''}`);
  });
  const sockets = [];
  const page = await ctx.newPage();
  page.on('websocket', (ws) => sockets.push(new URL(ws.url()).pathname));
  page.on('framenavigated', (f) => f === page.mainFrame() && log('at', { url: f.url() }));
  watch(page, 'phone');
  const audit = new Audit();

  try {
    // The relay's home, nothing paired: pairing comes first.
    await page.goto(baseURL, { waitUntil: 'domcontentloaded' });
    await page.locator(tid('pair-scan')).waitFor();
    result.home = new URL(page.url()).hash;
    await audit.check(page, 'pair a machine');
    await page.locator(tid('pair-device-name')).fill(params.deviceName);
    const t0 = Date.now();
    await page.locator(tid('pair-scan')).click();
    // Scanned, paired, and the machine's sessions open (through the channel); or an error.
    await page.locator(`${tid('new-session')}, ${tid('pair-error')}`).first().waitFor({ timeout: 60000 });
    if (await page.locator(tid('pair-error')).count()) throw new Error('pairing failed: ' + norm(await page.locator(tid('pair-error')).textContent()));
    result.pairMs = Date.now() - t0;
    await page.locator(`${tid('chan-state')}[data-state="open"]`).first().waitFor();
    result.badge = norm(await page.locator(tid('e2e-badge')).textContent());
    log('paired', { ms: result.pairMs, badge: result.badge });
    result.steps.push('paired');
    await audit.check(page, 'sessions of a paired machine');

    // Machines: the paired machine with its key's fingerprint.
    await page.goto(new URL('#/machines', baseURL).href);
    const pm = page.locator(tid('paired-machine'));
    await pm.first().waitFor();
    await pm.first().locator('summary').click();
    result.machines = {
      paired: await pm.count(),
      text: norm(await pm.first().textContent()),
      fingerprint: norm(await pm.first().locator(tid('machine-fingerprint')).textContent()),
    };
    await audit.check(page, 'machines with a paired machine');
    await pm.first().locator(tid('machine-item')).click();
    await page.locator(tid('new-session')).waitFor();
    result.steps.push('machines');

    // A session whose tool asks permission.
    await newSession(page, { cwd: params.cwd, prompt: params.prompt });
    const prompt = page.locator(`${tid('permission-prompt')}[data-request-id]`);
    await page.locator(tid('allow-once')).first().waitFor();
    result.promptText = norm(await prompt.first().textContent());
    const requestId = await prompt.first().getAttribute('data-request-id');
    const sessionId = decodeURIComponent(page.url().split('/s/')[1].split('/')[0]);
    await audit.check(page, 'conversation with a permission prompt, end to end', tall);
    result.steps.push('prompt');

    // The notification, as the machine's push shows it (docs/web-api.md's payload): a push
    // event in the service worker (headless chromium has no push service to receive one from),
    // then a tap on its Allow action (dispatched: there is no notification UI to tap).
    await page.evaluate(() => navigator.serviceWorker.ready.then(() => true)); // active: it may show notifications
    const sw = ctx.serviceWorkers()[0] ?? (await ctx.waitForEvent('serviceworker', { timeout: 30000 }));
    const tag = `${params.machineId}/${sessionId}/${requestId}`;
    const payload = {
      type: 'permission_request', machineId: params.machineId, sessionId, requestId, title: params.title || 'Bash wants to run',
      body: 'touch created-by-tool.txt', tag, url: `/#/m/${encodeURIComponent(params.machineId)}/s/${encodeURIComponent(sessionId)}`,
    };
    result.notification = await sw.evaluate(async (payload) => {
      self.dispatchEvent(new PushEvent('push', { data: JSON.stringify(payload) }));
      for (let i = 0; i < 100; i++) {
        const [n] = await self.registration.getNotifications({ tag: payload.tag });
        if (n) return { title: n.title, body: n.body, actions: n.actions.map((a) => a.action) };
        await new Promise((r) => setTimeout(r, 100));
        // chromium now and then lists a shown notification never (notify.mjs's pump says more):
        // the push once more, as a push service would deliver it again.
        if (i === 50) self.dispatchEvent(new PushEvent('push', { data: JSON.stringify(payload) }));
      }
      return null;
    }, payload);
    if (!result.notification) throw new Error('the service worker showed no notification for the push');
    log('notification shown', result.notification);
    await sw.evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag });
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n, action: 'allow' }));
    }, tag);
    // Answered: the page's prompt closes (the machine resolved it); or the service worker says
    // why not in a notification of its own.
    let failure = '';
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      if ((await page.locator(tid('allow-once')).count()) === 0) break;
      failure = await sw.evaluate(async (tag) => (await self.registration.getNotifications({ tag: tag + '/result' }))[0]?.body || '', tag);
      if (failure) break;
      await sleep(200);
    }
    if ((await page.locator(tid('allow-once')).count()) === 0) result.answeredFrom = 'notification';
    else {
      result.notificationFailure = failure || 'no answer within 30 s';
      log('the notification could not answer: answering in the page', { failure: result.notificationFailure });
      await page.locator(tid('allow-once')).first().click();
      result.answeredFrom = 'page';
    }
    await waitLastAssistant(page, params.want);
    result.replies = (await texts(page, 'assistant-text')).map(norm);
    result.toolCards = await page.locator(tid('tool-card')).count();
    result.steps.push('answered');

    // A reload: the pairing is remembered, the conversation comes back through the channel.
    await page.reload({ waitUntil: 'domcontentloaded' });
    // Booted: the conversation, or (a bug) another screen; the log says which, with the pairings.
    await page.locator(`${tid('conversation')}, ${tid('pair-scan')}, ${tid('login-token')}`).first().waitFor();
    log('after reload', {
      url: page.url(),
      pairings: await page.evaluate(async () => {
        const db = await new Promise((res, rej) => { const r = indexedDB.open('betcode', 1); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
        const p = await new Promise((res) => { const g = db.transaction('kv').objectStore('kv').get('pairings'); g.onsuccess = () => res(g.result); });
        db.close();
        return Array.isArray(p) ? p.length : typeof p;
      }).catch((e) => String(e)),
    });
    await waitLastAssistant(page, params.want);
    await page.locator(`${tid('chan-state')}[data-state="open"], ${tid('conversation')}`).first().waitFor();
    result.steps.push('reload');

    // The same code again (pasted this time): it was used, and the app says so with what to do.
    await page.goto(new URL('#/pair', baseURL).href);
    await page.locator(tid('pair-code')).fill(params.code);
    await page.locator(tid('pair-submit')).click();
    await page.locator(tid('pair-error')).waitFor();
    result.reusedCodeError = norm(await page.locator(tid('pair-error')).textContent());
    await audit.check(page, 'pair a machine, a used code');
    result.steps.push('reused');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  result.apiRequests = requests;
  result.webSockets = sockets;
  result.alerts = alerts;
  audit.assertClean();
  return result;
});
