// Sharing a session, in the owner's and the teammate's browsers (docs/security.md, "Sharing a
// session"). The owner's browser pairs with the machine (params.pairCode), opens the session and
// makes two share codes for bob in its Share panel: read-only and able to answer. Carol, a third
// user, logs in and pastes bob's code: the relay refuses her. Bob logs in and pastes the read-only
// code: the app opens the shared session (its stream, a banner saying read-only, the open
// permission prompt without answer buttons, no message box); then the answer code: the same
// session with Allow/Deny, and his Allow runs the tool. Then the owner stops the answer share in
// the panel and bob's channel WebSocket closes: result.cutMs is how long after the click.
// axe-core on the Share panel (phone and laptop) and on the shared conversation, read-only (phone
// and laptop) and answering (phone), in every look.
//
// params: pairCode (the machine's pairing code for the owner's browser), machineId, sessionId,
// bobToken, carolToken, want (the reply after the tool ran).
import { baseURL, laptop, launch, log, main, params, phone, recordAlerts, screenshots, watch } from './lib/harness.mjs';
import { login, norm, pairByCode, tid, waitLastAssistant } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';

const tall = { height: 2000 };

/** pasteCode pastes a code on the pair screen and waits for the shared session or an error. */
async function pasteCode(page, code, mode) {
  await page.goto(new URL('#/pair', baseURL).href);
  await page.locator(tid('pair-code')).fill(code);
  await page.locator(tid('pair-submit')).click();
  const done = mode ? `${tid('share-banner')}[data-mode="${mode}"]` : tid('share-banner');
  await page.locator(`${done}, ${tid('pair-error')}`).first().waitFor({ timeout: 60000 });
  if (await page.locator(tid('pair-error')).count()) return { error: norm(await page.locator(tid('pair-error')).textContent()) };
  return {};
}

/** makeCode makes a share code for user in the open Share panel. */
async function makeCode(page, user, mode) {
  await page.locator(tid('share-user')).fill(user);
  await page.locator(tid(`share-mode-${mode}`)).check();
  const before = await page.locator(tid('share-item')).count();
  await page.locator(tid('share-create')).click();
  await page.locator(`${tid('share-code')}, ${tid('share-error')}`).first().waitFor();
  if (await page.locator(tid('share-error')).count()) throw new Error('making a share code: ' + norm(await page.locator(tid('share-error')).textContent()));
  await page.waitForFunction(([sel, n]) => document.querySelectorAll(sel).length > n, [tid('share-item'), before]);
  return page.locator(tid('share-code')).inputValue();
}

await main(async () => {
  const result = { steps: [] };
  const audit = new Audit();

  // The owner's browser: paired with the machine, the session's Share panel.
  const octx = await launch({ viewport: phone });
  const oalerts = await recordAlerts(octx);
  await withAxe(octx);
  const owner = await octx.newPage();
  watch(owner, 'owner');
  await pairByCode(owner, params.pairCode, { who: 'the owner' });
  await owner.goto(new URL(`#/m/${encodeURIComponent(params.machineId)}/s/${encodeURIComponent(params.sessionId)}`, baseURL).href);
  await owner.locator(`${tid('share-panel')} summary`).click();
  const readCode = await makeCode(owner, 'bob', 'read');
  await audit.check(owner, 'share panel with a code (phone)', tall);
  if (params.outDir) await screenshots(owner, params.outDir, 'share-panel');
  await owner.setViewportSize(laptop);
  await audit.check(owner, 'share panel with a code (laptop)', tall);
  await owner.setViewportSize(phone);
  const answerCode = await makeCode(owner, 'bob', 'answer');
  result.ownerShares = (await owner.locator(tid('share-item')).allTextContents()).map(norm);
  log('share codes made', { shares: result.ownerShares });
  result.steps.push('codes made');
  params.readCode = readCode;
  params.answerCode = answerCode;

  // Carol holds bob's code: it is useless without bob's login.
  const cctx = await launch({ viewport: phone });
  const carol = await cctx.newPage();
  watch(carol, 'carol');
  await login(carol, params.carolToken);
  result.carolError = (await pasteCode(carol, params.readCode)).error ?? '';
  log('carol with bob\'s code', { error: result.carolError });
  await cctx.closeAll();
  result.steps.push('third user refused');

  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  const page = await ctx.newPage();
  watch(page, 'bob');
  const channels = [];
  page.on('websocket', (ws) => {
    if (new URL(ws.url()).pathname !== '/api/channel') return;
    const c = { ws, closedAt: 0 };
    c.closed = new Promise((r) => ws.on('close', () => r((c.closedAt = Date.now()))));
    channels.push(c);
  });
  await login(page, params.bobToken);

  // Read-only: the stream and the open prompt, no way to answer or write.
  const read = await pasteCode(page, params.readCode, 'read');
  if (read.error) throw new Error('bob pairing with the read-only code: ' + read.error);
  result.readURL = new URL(page.url()).hash;
  result.readBanner = norm(await page.locator(tid('share-banner')).textContent());
  const prompt = page.locator(`${tid('permission-prompt')}[data-request-id]`);
  await prompt.first().waitFor();
  result.readPrompt = norm(await prompt.first().textContent());
  result.readAnswerButtons = await page.locator(`${tid('allow-once')}, ${tid('deny')}`).count();
  result.readMessageBox = await page.locator(tid('message-input')).count();
  await audit.check(page, 'shared session, read-only (phone)', tall);
  if (params.outDir) await screenshots(page, params.outDir, 'shared-read-only');
  await page.setViewportSize(laptop);
  await audit.check(page, 'shared session, read-only (laptop)', tall);
  await page.setViewportSize(phone);
  result.steps.push('read-only');

  // Answer mode: Allow runs the tool.
  const ans = await pasteCode(page, params.answerCode, 'answer');
  if (ans.error) throw new Error('bob pairing with the answer code: ' + ans.error);
  await page.locator(tid('allow-once')).first().waitFor();
  result.answerMessageBox = await page.locator(tid('message-input')).count();
  await audit.check(page, 'shared session, can answer (phone)', tall);
  await page.locator(tid('allow-once')).first().click();
  await waitLastAssistant(page, params.want);
  result.steps.push('answered');

  // The owner stops the answer share: bob's open channel's WebSocket closes.
  const open = channels.filter((c) => !c.closedAt);
  if (!open.length) throw new Error('no open channel WebSocket before the unshare');
  const item = owner.locator(tid('share-item'), { hasText: 'can answer' }).filter({ has: owner.locator(tid('share-stop')) });
  await owner.bringToFront();
  const at = Date.now();
  await item.first().locator(tid('share-stop')).click();
  let timer;
  const first = await Promise.race([...open.map((c) => c.closed), new Promise((r) => (timer = setTimeout(() => r(0), 10000)))]);
  clearTimeout(timer);
  result.cutMs = first ? first - at : -1;
  log('unshared', { cutMs: result.cutMs });
  result.steps.push('cut');
  // Bob's app tries the channel again and is refused: it says why (the share ended).
  await page.bringToFront();
  const failed = page.locator(`${tid('chan-state')}[data-state="failed"]`);
  await failed.first().waitFor({ timeout: 15000 }).catch(() => {});
  result.afterCut = (await failed.count()) ? norm(await failed.first().textContent()) : '';
  log('after the cut', { chanState: result.afterCut });

  await owner.locator(`${tid('share-item')}[data-state="stopped"]`).first().waitFor();
  result.alerts = [...oalerts, ...alerts];
  audit.assertClean();
  return result;
});
