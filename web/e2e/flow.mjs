// flow.mjs: the main flow of the web app on a phone, as a person does it.
//
// Log in with a token, pick the machine, start a session and see the
// streamed reply; approve a permission prompt; answer a question; cancel a
// turn; reload mid-stream; a second tab on the same session sees the same
// stream. BETCODE_E2E holds what to type and what to expect (see the Go
// tests, relay/e2e/browser_test.go and agent/e2e/browser_test.go); the steps
// to run are params.steps (default: all).
import { launch, phone, params, token, main, watch, log, sync, recordAlerts } from './lib/harness.mjs';
import {
  tid, norm, login, pickMachine, newSession, send, texts, waitLastAssistant, waitAssistantIncludes,
} from './lib/app.mjs';

const all = ['start', 'secondTab', 'permission', 'question', 'cancel', 'reload'];
const steps = new Set(params.steps || all);

await main(async () => {
  const result = { steps: [] };
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  const page = await ctx.newPage();
  watch(page, 'tab1');

  const t0 = Date.now();
  await login(page, token);
  result.loginMs = Date.now() - t0;
  const picked = await pickMachine(page, params.machine, { optional: !!params.machineOptional });
  result.machinePicked = picked.picked;
  result.pickerShownAfterLogin = picked.shown;

  // start: a new session with a first prompt; its reply streams in.
  await newSession(page, { cwd: params.cwd, prompt: params.start.prompt });
  const started = Date.now();
  await waitLastAssistant(page, params.start.want);
  result.start = { text: (await texts(page, 'assistant-text')).map(norm), replyMs: Date.now() - started };
  result.sessionURL = page.url();
  result.steps.push('start');

  // secondTab: the same session in another tab of the same browser.
  let tab2 = null;
  if (steps.has('secondTab')) {
    tab2 = await ctx.newPage();
    watch(tab2, 'tab2');
    await tab2.goto(result.sessionURL, { waitUntil: 'domcontentloaded' });
    const first = tab2.locator(`${tid('conversation')}, ${tid('login-token')}`).first();
    await first.waitFor();
    if (await tab2.locator(tid('login-token')).isVisible()) {
      // The token is not shared between tabs: log in again.
      result.secondTabNeededLogin = true;
      await login(tab2, token);
      await tab2.goto(result.sessionURL, { waitUntil: 'domcontentloaded' });
    }
    await waitLastAssistant(tab2, params.start.want);
    result.steps.push('secondTab');
  }

  // permission: the tool waits for the user; allow it once.
  if (steps.has('permission')) {
    const p = params.permission;
    await send(page, p.prompt);
    const prompt = page.locator(tid('permission-prompt'));
    await prompt.first().waitFor();
    result.permission = { promptText: norm(await prompt.first().textContent()) };
    if (tab2) {
      await tab2.locator(tid('permission-prompt')).first().waitFor();
      result.permission.seenInTab2 = true;
    }
    await prompt.first().locator(tid('allow-once')).click();
    await waitLastAssistant(page, p.want);
    // The answered prompt stays in the conversation, without its buttons.
    await page.locator(tid('allow-once')).first().waitFor({ state: 'detached' });
    result.permission.answeredText = norm(await prompt.first().textContent());
    if (tab2) {
      await waitLastAssistant(tab2, p.want);
      await tab2.locator(tid('allow-once')).first().waitFor({ state: 'detached' });
    }
    result.permission.toolCards = await page.locator(tid('tool-card')).count();
    const answer = await sync('permission-done');
    result.permission.fileOnDisk = answer.fileExists;
    result.steps.push('permission');
  }

  // question: AskUserQuestion with two questions (one multi-select); pick
  // options in both and answer.
  if (steps.has('question')) {
    const q = params.question;
    await send(page, q.prompt);
    const box = page.locator(tid('question')).first();
    await box.waitFor();
    result.question = { texts: (await page.locator(tid('question')).allTextContents()).map(norm) };
    for (const label of q.pick) {
      await page.locator(tid('question-option'), { hasText: label }).first().click();
    }
    await page.locator(tid('question-submit')).first().click();
    // Claude's reply quotes the answers it got.
    await waitAssistantIncludes(page, q.replyIncludes);
    await page.locator(tid('question-submit')).first().waitFor({ state: 'detached', timeout: 5000 }).catch(() => {});
    result.question.submitButtonsLeft = await page.locator(tid('question-submit')).count();
    result.question.reply = (await texts(page, 'assistant-text')).map(norm).pop();
    result.question.answeredTexts = (await page.locator(tid('question')).allTextContents()).map(norm);
    result.steps.push('question');
  }

  // cancel: a slow turn, cancelled after its first words.
  if (steps.has('cancel')) {
    const c = params.cancel;
    await send(page, c.prompt);
    await waitAssistantIncludes(page, c.waitFor);
    await page.locator(tid('cancel-turn')).first().click();
    const clicked = Date.now();
    // The Go test waits until the agent ended the turn.
    const answer = await sync('cancel-done');
    result.cancel = { stopReason: answer.stopReason, agentEndedMs: Date.now() - clicked };
    // Then the Stop button goes (disabled) and the streamed text stays.
    try {
      await page.waitForFunction((sel) => {
        const el = document.querySelector(sel);
        return !el || el.disabled || el.offsetParent === null;
      }, tid('cancel-turn'), { timeout: 5000 });
      result.cancel.stopGoneMs = Date.now() - clicked;
    } catch {
      result.cancel.stopStillEnabled = true;
    }
    result.cancel.lastText = (await texts(page, 'assistant-text')).map(norm).pop();
    result.steps.push('cancel');
  }

  // reload: reload the page while a reply streams; it must end up exactly as
  // scripted, no delta twice or missing.
  if (steps.has('reload')) {
    const r = params.reload;
    await sync('reload-turn'); // the Go test scripts the reply
    const before = (await texts(page, 'assistant-text')).map(norm);
    await send(page, r.prompt);
    await waitAssistantIncludes(page, r.reloadAfter);
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.locator(tid('conversation')).waitFor();
    const reloaded = Date.now();
    await waitLastAssistant(page, r.want);
    result.reload = { afterReloadMs: Date.now() - reloaded };
    const after = (await texts(page, 'assistant-text')).map(norm);
    result.reload.before = before;
    result.reload.after = after;
    if (tab2) {
      await waitLastAssistant(tab2, r.want);
      result.reload.tab2 = (await texts(tab2, 'assistant-text')).map(norm);
    }
    result.steps.push('reload');
  }

  result.assistantTexts = (await texts(page, 'assistant-text')).map(norm);
  result.toolCards = await page.locator(tid('tool-card')).count();
  if (tab2) {
    result.tab2AssistantTexts = (await texts(tab2, 'assistant-text')).map(norm);
    result.tab2ToolCards = await tab2.locator(tid('tool-card')).count();
  }
  result.alerts = alerts;
  log('flow done', { steps: result.steps });
  return result;
});
