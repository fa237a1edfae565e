// Never stale: a paired phone's conversation while its page is frozen (the DevTools protocol's
// Page.setWebLifecycleState frozen/active) and while it is offline (context.setOffline), with the
// turn streaming on at the machine; on resume the DOM must show every delta exactly once, in
// order, within 1 s. A message written offline waits in the outbox ("offline, 1 message
// queued") and is delivered once when the network returns.
//
// params: code (betcode-pair:1:…), deviceName, cwd, hello (the first prompt) and helloReply,
// turn1 / turn2 (prompts whose replies the Go test scripts: prefix1 / prefix2 and n deltas),
// queued (the message written offline) and queuedReply, inflight (the message cut in flight), whileDown (the message written while the
// machine is away).
// Sync points: turn1, frozen (answer once the machine finished turn 1), turn2, offline (the same
// for turn 2), delivered (once the queued message's turn ended), inflight (once the turn of the
// message cut in flight ended), machineDown / machineUp (the Go test kills the agent, then starts
// it again), machineDelivered (once that message's turn ended). The Go test then checks the agent
// took each message once.
import { launch, laptop, log, main, params, phone, recordAlerts, recordTraffic, sync, watch } from './lib/harness.mjs';
import { newSession, norm, pairByCode, send, texts, tid, waitLastAssistant } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';

const full = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(' ');

/** Waits until an assistant text of the page is want (spaces normalised); returns the ms it took. */
async function shows(page, want, ms) {
  const t0 = Date.now();
  await page.waitForFunction(
    (want) => [...document.querySelectorAll('[data-testid="assistant-text"]')].some((e) => (e.textContent || '').replace(/\s+/g, ' ').trim() === want),
    want,
    { timeout: ms, polling: 'raf' },
  );
  return Date.now() - t0;
}

/** How many times each numbered delta of prefix shows in the page's assistant texts, in order. */
async function deltas(page, prefix) {
  const all = (await texts(page, 'assistant-text')).map(norm).join(' ');
  return all.split(' ').filter((w) => w.startsWith(prefix) && /^\w\d+$/.test(w));
}

await main(async () => {
  const result = { steps: [] };
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  // Every /api request and WebSocket, for the Go test: nothing of the machines in clear.
  const { requests, sockets } = recordTraffic(ctx);
  const page = await ctx.newPage();
  watch(page, 'phone');
  const audit = new Audit();
  const cdp = await ctx.newCDPSession(page);
  const strip = page.locator(tid('live-state'));

  // Pair by pasting the code, then a first turn.
  await pairByCode(page, params.code, { deviceName: params.deviceName });
  await newSession(page, { cwd: params.cwd, prompt: params.hello });
  await waitLastAssistant(page, params.helloReply);
  await page.locator(`${tid('live-state')}[data-state="live"]`).waitFor();
  result.steps.push('paired');

  // 1. Frozen mid-turn: the turn streams on at the machine, the page runs nothing.
  await sync('turn1');
  await send(page, params.turn1);
  await page.waitForFunction((p) => [...document.querySelectorAll('[data-testid="assistant-text"]')].some((e) => (e.textContent || '').includes(p)), params.prefix1 + '0');
  await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
  await sync('frozen');
  const t1 = Date.now();
  await cdp.send('Page.setWebLifecycleState', { state: 'active' });
  await shows(page, full(params.prefix1, params.n), 10000);
  result.frozenResumeMs = Date.now() - t1;
  result.frozenDeltas = await deltas(page, params.prefix1);
  await page.locator(`${tid('live-state')}[data-state="live"]`).waitFor();
  log('frozen and resumed', { ms: result.frozenResumeMs, deltas: result.frozenDeltas.length });
  result.steps.push('frozen');

  // 2. Offline mid-turn, and a message written meanwhile.
  await sync('turn2');
  await send(page, params.turn2);
  await page.waitForFunction((p) => [...document.querySelectorAll('[data-testid="assistant-text"]')].some((e) => (e.textContent || '').includes(p)), params.prefix2 + '0');
  await ctx.setOffline(true);
  await page.locator(`${tid('live-state')}[data-state="offline"]`).waitFor();
  await sync('offline');
  await send(page, params.queued);
  await page.locator(`${tid('live-state')}[data-queued="1"]`).waitFor();
  result.offlineStrip = norm(await strip.textContent());
  await audit.check(page, 'conversation, offline with a queued message');
  const t2 = Date.now();
  await ctx.setOffline(false);
  await shows(page, full(params.prefix2, params.n), 10000);
  result.offlineResumeMs = Date.now() - t2;
  result.offlineDeltas = await deltas(page, params.prefix2);
  log('back online', { ms: result.offlineResumeMs, deltas: result.offlineDeltas.length });
  await waitLastAssistant(page, params.queuedReply, 30000);
  await page.locator(`${tid('live-state')}[data-queued="0"][data-state="live"]`).waitFor();
  result.liveStrip = norm(await strip.textContent());
  await sync('delivered');
  result.steps.push('offline');

  // 3. A message sent and cut at once: the network drops while its send (or its ack) is in
  // flight. The outbox sends it again with the same key once back; the machine takes it once.
  await send(page, params.inflight);
  await ctx.setOffline(true);
  await page.locator(`${tid('live-state')}[data-state="offline"]`).waitFor();
  await ctx.setOffline(false);
  await page.locator(`${tid('live-state')}[data-queued="0"][data-state="live"]`).waitFor();
  await sync('inflight');
  result.steps.push('inflight');

  // 4. The machine goes away (its agent killed): a message waits in the outbox, and is delivered
  // once when the machine is back (a new agent process on the same data).
  await sync('machineDown');
  await page.locator(`${tid('live-state')}[data-state="reconnecting"]`).waitFor({ timeout: 60000 });
  await send(page, params.whileDown);
  await page.locator(`${tid('live-state')}[data-queued="1"]`).waitFor();
  result.downStrip = norm(await strip.textContent());
  await sync('machineUp');
  await page.locator(`${tid('live-state')}[data-queued="0"][data-state="live"]`).waitFor({ timeout: 90000 });
  await sync('machineDelivered');
  result.steps.push('machine');

  result.userTexts = (await page.$$eval('.user-msg', (els) => els.map((e) => e.textContent || ''))).map((t) => norm(t).replace(/^You: /, ''));

  // The strip in the other looks: laptop.
  await page.setViewportSize(laptop);
  await audit.check(page, 'conversation, live (laptop)');
  result.apiRequests = requests;
  result.webSockets = sockets;
  result.alerts = alerts;
  audit.assertClean();
  return result;
});
