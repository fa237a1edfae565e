// The inbox across machines: a phone paired with two machines (pasted codes) has the inbox as its
// home; it lists what waits on each machine (a permission prompt, a question), newest first, with the count in
// the title ("(2) BetCode") and on the app icon (navigator.setAppBadge, recorded: headless
// chromium shows no icon); one is answered in place (the non-current machine's, through its own
// channel), its finished turn then waits as "not yet seen" until marked seen, and the counts go
// down. Axe-core on the inbox, phone and laptop, light and dark. Then the speed budget: 20
// machines × 50 sessions fed to the inbox (synthetic, through its benchmark hook) render within
// 100 ms on a CPU throttled 4× (Emulation.setCPUThrottlingRate).
//
// params: codes (two betcode-pair:1:… codes), deviceName, choose (two option labels to pick in
// the question). Sync points: prompts (the Go test starts a session on each machine: a tool that
// asks permission on the first, a question on the second; it answers once both wait), answered
// (twice: once the answered machine's turn ended).
import { baseURL, launch, laptop, log, main, params, phone, recordAlerts, recordTraffic, screenshots, sync, watch } from './lib/harness.mjs';
import { pairByCode, tid } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';
import { measureInbox } from './lib/inboxperf.mjs';

/** Records the app icon's badge: headless chromium may have no Badging API, and shows no icon. */
function recordBadge() {
  window.__badges = [];
  navigator.setAppBadge = (n) => (window.__badges.push(n ?? 0), Promise.resolve());
  navigator.clearAppBadge = () => (window.__badges.push(0), Promise.resolve());
}

const items = (page, sel = '') => page.locator(`${tid('inbox-item')}${sel}`);

await main(async () => {
  const result = { steps: [] };
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  await ctx.addInitScript(recordBadge);
  // Every /api request and WebSocket, for the Go test: nothing of the machines in clear.
  const { requests, sockets } = recordTraffic(ctx);
  const page = await ctx.newPage();
  watch(page, 'phone');
  const audit = new Audit();

  // Pair both machines by pasting their codes.
  for (const code of params.codes) {
    await pairByCode(page, code, { deviceName: params.deviceName });
  }
  result.current = decodeURIComponent(page.url().split('#/m/')[1]?.split('/')[0] || '');
  result.steps.push('paired');

  // The home is the inbox now.
  await page.goto(baseURL, { waitUntil: 'domcontentloaded' });
  await page.locator(tid('inbox')).waitFor();
  result.home = new URL(page.url()).hash;
  await sync('prompts');
  await items(page, '[data-kind="permission"]').first().waitFor({ timeout: 60000 });
  await items(page, '[data-kind="question"]').first().waitFor({ timeout: 60000 });
  await page.waitForFunction(() => document.title === '(2) BetCode' && window.__badges.at(-1) === 2);
  result.before = {
    machines: await items(page).evaluateAll((es) => es.map((e) => e.getAttribute('data-machine'))),
    kinds: await items(page).evaluateAll((es) => es.map((e) => e.getAttribute('data-kind'))),
    title: await page.title(),
    badge: await page.evaluate(() => window.__badges.at(-1)),
  };
  log('two prompts', result.before);
  await audit.check(page, 'inbox, two machines waiting');
  await page.setViewportSize(laptop);
  await audit.check(page, 'inbox, two machines waiting (laptop)');
  await page.setViewportSize(phone);
  // The screen for docs/screenshots (make screenshots passes outDir): phone and laptop, light and dark.
  if (params.outDir) await screenshots(page, params.outDir, 'inbox');
  result.steps.push('listed');

  // Answer the permission prompt in place (the machine that is not the current one: its channel).
  const other = await items(page, '[data-kind="permission"]').getAttribute('data-machine');
  result.answered = other;
  await items(page, `[data-kind="permission"][data-machine="${other}"]`).locator(tid('inbox-allow')).click();
  await items(page, `[data-kind="permission"][data-machine="${other}"]`).waitFor({ state: 'detached' });
  await sync('answered', { machine: other });
  // Its turn ended: not yet seen, until marked so.
  const done = items(page, `[data-kind="done"][data-machine="${other}"]`);
  await done.waitFor({ timeout: 60000 });
  result.afterAnswer = { title: await page.title(), kinds: await items(page).evaluateAll((es) => es.map((e) => e.getAttribute('data-kind'))) };
  await audit.check(page, 'inbox, a finished turn not yet seen');
  await done.locator(tid('inbox-seen')).click();
  await done.waitFor({ state: 'detached' });
  await page.waitForFunction(() => document.title === '(1) BetCode');
  await page.waitForFunction(() => window.__badges.at(-1) === 1);
  result.after = { title: await page.title(), badge: await page.evaluate(() => window.__badges.at(-1)), count: await items(page).count() };
  log('one answered, one seen', result.after);
  result.steps.push('answered');

  // Answer the question in place (the current machine's: the store's stream), then see its turn.
  const qm = await items(page, '[data-kind="question"]').getAttribute('data-machine');
  result.questionOf = qm;
  const qi = items(page, '[data-kind="question"]');
  await qi.locator('label', { hasText: params.choose[0] }).click();
  await qi.locator('label', { hasText: params.choose[1] }).click();
  await qi.locator(tid('inbox-answer')).click();
  await qi.waitFor({ state: 'detached' });
  await sync('answered', { machine: qm });
  const done2 = items(page, `[data-kind="done"][data-machine="${qm}"]`);
  await done2.waitFor({ timeout: 60000 });
  await done2.locator(tid('inbox-seen')).click();
  await page.waitForFunction(() => document.title === 'BetCode' && window.__badges.at(-1) === 0);
  result.final = { title: await page.title(), badge: await page.evaluate(() => window.__badges.at(-1)), count: await items(page).count() };
  await audit.check(page, 'inbox, nothing waiting');
  log('question answered, all seen', result.final);
  result.steps.push('question');

  // Speed: 20 machines × 50 sessions, each with a waiting prompt, on a CPU throttled 4×.
  result.perf = await measureInbox(ctx, page, 5);
  log('inbox render (4× CPU throttle)', result.perf);
  result.steps.push('perf');

  result.apiRequests = requests;
  result.webSockets = sockets;
  result.alerts = alerts;
  audit.assertClean();
  return result;
});
