// Notifications that clear (issue 24): two browser contexts are two phones of one user, each
// paired with the machine (pasting its code) and subscribed to its push notifications (Settings'
// switch; headless chromium has no push service, so PushManager.subscribe gives the loopback push
// service's subscription the Go test made, keys and all). The machine encrypts each message for
// each subscription; the relay POSTs it to the loopback push service, which decrypts it with the
// subscription's keys, as the browser's push stack would, and hands it to this script; the script
// delivers it to that phone's service worker as a push message (DevTools ServiceWorker.
// deliverPushMessage). A session's tool asks permission on phone A; both phones show the
// notification; A answers from its notification's Allow action (the service worker's sealed
// envelope; the page if that fails); phone B's notification must be gone within 2 s (measured),
// and A gets no "resolved" message. A second prompt is answered in A's page (the app closes A's
// notification itself): B's clears within 2 s again. Then a third prompt nobody answers times out
// (--permission-timeout on the machine): both phones' notifications clear.
//
// params: codes [A's, B's] (betcode-pair:1:…), subs [{id, endpoint, p256dh, auth}] (A's, B's),
// mailbox (the Go test's URL handing out each subscription's messages), machineId, cwd, prompt,
// want (the reply after the tool ran), timeoutPath (bool), permissionTimeoutMs.
import { baseURL, launch, log, main, params, phone, watch } from './lib/harness.mjs';
import { newSession, norm, pairByCode, send, texts, tid, waitLastAssistant } from './lib/app.mjs';

const origin = new URL(baseURL).origin;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The page's PushManager hands out the loopback push service's subscription (sub). */
function stubPush(sub) {
  if (!self.PushManager) return;
  const fake = {
    endpoint: sub.endpoint,
    expirationTime: null,
    options: { userVisibleOnly: true },
    getKey: () => null,
    toJSON: () => ({ endpoint: sub.endpoint, expirationTime: null, keys: { p256dh: sub.p256dh, auth: sub.auth } }),
    unsubscribe: async () => true,
  };
  const key = 'betcode-test-push-subscribed';
  PushManager.prototype.subscribe = async function () {
    sessionStorage.setItem(key, '1');
    return fake;
  };
  PushManager.prototype.getSubscription = async function () {
    return sessionStorage.getItem(key) ? fake : null;
  };
  PushManager.prototype.permissionState = async () => 'granted';
}

/** openPhone starts a browser, pairs it with code, turns its notifications on, and finds its service worker. */
async function openPhone(name, code, sub) {
  const ctx = await launch({ viewport: phone });
  await ctx.grantPermissions(['notifications'], { origin });
  await ctx.addInitScript(stubPush, sub);
  const page = await ctx.newPage();
  const seen = watch(page, name);
  // The service worker's warnings and errors go into the report with the page's.
  const sws = new Set();
  const listen = (w) => {
    if (sws.has(w)) return;
    sws.add(w);
    w.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') seen.errors.push(`service worker console.${m.type()}: ${m.text()}`);
    });
  };
  ctx.on('serviceworker', listen);
  await pairByCode(page, code, { deviceName: name, who: name });

  // Settings: "Notify this device…" on; the subscription goes to the machine inside the channel.
  await page.goto(new URL('#/settings', baseURL).href);
  await page.locator(tid('push-toggle')).click();
  await page.locator(`${tid('push-toggle')}:checked, .card .error`).first().waitFor();
  if (!(await page.locator(`${tid('push-toggle')}:checked`).count())) {
    throw new Error(`${name}: turning notifications on failed: ` + norm(await page.locator('.card .error').first().textContent()));
  }
  log('notifications on', { name });

  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  const sw = ctx.serviceWorkers()[0] ?? (await ctx.waitForEvent('serviceworker', { timeout: 30000 }));
  ctx.serviceWorkers().forEach(listen);
  const cdp = await ctx.newCDPSession(page);
  let regId;
  const found = new Promise((resolve) => {
    cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => {
      for (const r of e.registrations) {
        if (!r.isDeleted && r.scopeURL === origin + '/') {
          regId = r.registrationId;
          resolve();
        }
      }
    });
  });
  await cdp.send('ServiceWorker.enable');
  await Promise.race([found, sleep(10000)]);
  if (!regId) throw new Error(`${name}: no service worker registration for ${origin}/`);
  return { name, ctx, page, sw, cdp, regId, sub, received: [], redelivered: [], via: new Set() };
}

/** deliver hands the push message data (the decrypted payload, as a string) to p's service worker. */
async function deliver(p, data) {
  try {
    await p.cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId: p.regId, data });
    p.via.add('ServiceWorker.deliverPushMessage');
  } catch (err) {
    // An older chromium: the same push event, dispatched in the worker.
    log('deliverPushMessage failed; dispatching the push event', { err: String(err) });
    await (await worker(p)).evaluate((data) => self.dispatchEvent(new PushEvent('push', { data })), data);
    p.via.add('dispatchEvent');
  }
}

/** pump delivers p's messages from the push service until stop is aborted. */
async function pump(p, stop) {
  while (!stop.aborted) {
    let r;
    try {
      r = await fetch(`${params.mailbox}/next?sub=${encodeURIComponent(p.sub.id)}`, { signal: stop });
    } catch (err) {
      if (stop.aborted) return;
      throw err;
    }
    if (r.status === 204) continue;
    if (!r.ok) throw new Error(`mailbox: ${r.status}`);
    const data = await r.text();
    let d = {};
    try {
      d = JSON.parse(data);
    } catch {}
    p.received.push({ type: d.type, tag: d.tag, at: Date.now() });
    log('push delivered', { phone: p.name, type: d.type });
    await deliver(p, data);
    // Chromium loses track of a notification now and then: showNotification resolves, no
    // notificationclose fires, yet getNotifications lists it never (seen with the worker logging
    // both: most likely the page's getNotifications, polled here every 20 ms, syncing the
    // notification database against the displayed ones before the new one is displayed). A
    // notification the app cannot list the test cannot see, and a "resolved" could not close it;
    // so a message that left no trace in 5 s is delivered once more, and the count is reported.
    if (d.tag && !(await waitShown(p, d.tag, d.type !== 'resolved', 5000))) {
      p.redelivered.push(`${d.type} ${d.tag}`);
      log('the push left no trace: delivering it again', { phone: p.name, type: d.type });
      await deliver(p, data);
    }
  }
}

/**
 * shown lists the notifications p's service worker shows with tag, asked from the page (the
 * registration is the same; a worker stopped while idle and started again by the next push would
 * leave a handle to it dead).
 */
const shown = (p, tag) =>
  p.page.evaluate(
    async (tag) => (await (await navigator.serviceWorker.ready).getNotifications()).filter((n) => n.tag === tag).map((n) => ({ title: n.title, body: n.body })),
    tag,
  );

/** state says what p shows and received, for an error. */
async function state(p) {
  const tags = await p.page
    .evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => n.tag))
    .catch((e) => String(e));
  return `${p.name} shows ${JSON.stringify(tags)}, received ${JSON.stringify(p.received.map((m) => `${m.type} ${m.tag}`))}, delivered again ${JSON.stringify(p.redelivered)}`;
}

/** worker is p's running service worker (started again if it was stopped). */
async function worker(p) {
  await p.page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  const all = p.ctx.serviceWorkers();
  return all[all.length - 1] ?? p.sw;
}

/** waitShown waits until p shows (want true) or no longer shows (false) a notification with tag; returns when, or 0. */
async function waitShown(p, tag, want, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await shown(p, tag)).length > 0 === want) return Date.now();
    await sleep(20);
  }
  return 0;
}

/** openPrompt waits for the page's permission prompt whose id is none of not, and returns its tag. */
async function openPrompt(page, not = []) {
  const sel = `${tid('permission-prompt')}[data-request-id]` + not.map((id) => `:not([data-request-id="${id}"])`).join('');
  await page.locator(sel).first().waitFor({ timeout: 90000 });
  const requestId = await page.locator(sel).first().getAttribute('data-request-id');
  const sessionId = decodeURIComponent(page.url().split('/s/')[1].split('/')[0]);
  return { requestId, sessionId, tag: `${params.machineId}/${sessionId}/${requestId}` };
}

await main(async () => {
  const result = { steps: [] };
  const [A, B] = await Promise.all([openPhone('Phone A', params.codes[0], params.subs[0]), openPhone('Phone B', params.codes[1], params.subs[1])]);
  result.steps.push('paired');
  const stop = new AbortController();
  const pumps = [A, B].map((p) => pump(p, stop.signal).catch((err) => log('pump failed', { phone: p.name, err: String(err) })));

  try {
    // Phone A: a session whose tool asks permission.
    await A.page.goto(new URL(`#/m/${encodeURIComponent(params.machineId)}`, baseURL).href);
    await newSession(A.page, { cwd: params.cwd, prompt: params.prompt });
    const first = await openPrompt(A.page);
    result.tag = first.tag;
    const [atA, atB] = await Promise.all([waitShown(A, first.tag, true, 30000), waitShown(B, first.tag, true, 30000)]);
    if (!atA || !atB) throw new Error(`the prompt's notification (${first.tag}): phone A ${atA ? 'shown' : 'not shown'}, phone B ${atB ? 'shown' : 'not shown'}; ${await state(A)}; ${await state(B)}`);
    result.shownB = await shown(B, first.tag);
    log('both phones show the notification', { tag: first.tag, b: result.shownB });
    result.steps.push('notified');

    // A answers from its notification's Allow action; B's notification must go.
    let t0 = Date.now();
    await (await worker(A)).evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag });
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n, action: 'allow' }));
    }, first.tag);
    result.answeredFrom = 'notification';
    let cleared = 0;
    const deadline = Date.now() + 30000;
    while (!cleared && Date.now() < deadline) {
      if ((await shown(B, first.tag)).length === 0) {
        cleared = Date.now();
        break;
      }
      if (result.answeredFrom === 'notification') {
        const failure = await A.page.evaluate(async (tag) => (await (await navigator.serviceWorker.ready).getNotifications({ tag: tag + '/result' }))[0]?.body || '', first.tag);
        if (failure) {
          // The sealed answer did not go through: A answers in the page, and the clock restarts.
          result.notificationFailure = failure;
          log('the notification could not answer: answering in the page', { failure });
          t0 = Date.now();
          await A.page.locator(tid('allow-once')).first().click();
          result.answeredFrom = 'page';
        }
      }
      await sleep(20);
    }
    if (!cleared) throw new Error("phone B's notification was not withdrawn within 30 s of the answer");
    result.clearMs = cleared - t0;
    result.aShownAfter = (await shown(A, first.tag)).length;
    log("phone B's notification withdrawn", { ms: result.clearMs, answeredFrom: result.answeredFrom });
    await waitLastAssistant(A.page, params.want, 60000);
    result.steps.push('cleared');

    // The same session, a second prompt, answered in A's page this time.
    const replies = async () => (await texts(A.page, 'assistant-text')).map(norm).filter((t) => t === params.want).length;
    const before = await replies();
    await send(A.page, params.prompt);
    const second = await openPrompt(A.page, [first.requestId]);
    result.pageTag = second.tag;
    const [pa, pb] = await Promise.all([waitShown(A, second.tag, true, 30000), waitShown(B, second.tag, true, 30000)]);
    if (!pa || !pb) throw new Error(`the second prompt's notification (${second.tag}): phone A ${pa ? 'shown' : 'not shown'}, phone B ${pb ? 'shown' : 'not shown'}; ${await state(A)}; ${await state(B)}`);
    const t1 = Date.now();
    await A.page.locator(`${tid('permission-prompt')}[data-request-id="${second.requestId}"] ${tid('allow-once')}`).click();
    const [cb, ca] = await Promise.all([waitShown(B, second.tag, false, 30000), waitShown(A, second.tag, false, 10000)]);
    if (!cb) throw new Error("phone B's notification was not withdrawn within 30 s of the answer in A's page");
    result.pageClearMs = cb - t1;
    result.pageAClosed = !!ca;
    log("answered in A's page: phone B's notification withdrawn", { ms: result.pageClearMs, aClosed: result.pageAClosed });
    const deadline2 = Date.now() + 60000;
    while ((await replies()) <= before && Date.now() < deadline2) await sleep(100);
    result.steps.push('page');

    if (params.timeoutPath) {
      // A second prompt nobody answers: the machine's permission timeout denies it, and both
      // phones' notifications clear.
      await send(A.page, params.prompt);
      const third = await openPrompt(A.page, [first.requestId, second.requestId]);
      result.timeoutTag = third.tag;
      const [sa, sb] = await Promise.all([waitShown(A, third.tag, true, 30000), waitShown(B, third.tag, true, 30000)]);
      if (!sa || !sb) throw new Error(`the third prompt's notification (${third.tag}): phone A ${sa ? 'shown' : 'not shown'}, phone B ${sb ? 'shown' : 'not shown'}; ${await state(A)}; ${await state(B)}`);
      const ms = params.permissionTimeoutMs + 30000;
      const [ca, cb] = await Promise.all([waitShown(A, third.tag, false, ms), waitShown(B, third.tag, false, ms)]);
      if (!ca || !cb) throw new Error(`the timed-out prompt's notification stayed: phone A ${ca ? 'cleared' : 'shown'}, phone B ${cb ? 'cleared' : 'shown'}`);
      result.timeoutShownMs = { a: ca - sa, b: cb - sb };
      log('the timed-out prompt cleared on both phones', result.timeoutShownMs);
      result.steps.push('timeout');
    }
  } finally {
    stop.abort();
    await Promise.all(pumps);
  }
  result.received = { a: A.received, b: B.received };
  result.redelivered = { a: A.redelivered, b: B.redelivered };
  result.deliveredVia = [...new Set([...A.via, ...B.via])];
  return result;
});
