// flow.mjs: the main flow of the web app on a phone, as a person does it.
//
// Log in with a token, pick the machine, start a session and see the
// streamed reply; approve a permission prompt; a markdown reply with code;
// answer a question; cancel a turn; reload mid-stream; a second tab on the
// same session sees the same stream; the session's changes. BETCODE_E2E
// holds what to type and what to expect (see the Go tests,
// relay/e2e/browser_test.go and agent/e2e/browser_test.go); the steps to run
// are params.steps (default: all).
//
// Accessibility: axe-core (lib/axe.mjs) checks every screen on the way, in
// the light and dark colour schemes and the app's explicit themes: login,
// the machine picker (when it shows), the new-session form, the
// conversation with a pending permission prompt, with a markdown reply (code
// blocks) and open tool cards, with an open question form, the changes view
// with a diff open, settings and the session list. The script fails at the
// end with every violation.
import { launch, phone, params, token, main, watch, log, sync, recordAlerts } from './lib/harness.mjs';
import {
  tid, norm, login, pickMachine, newSession, send, texts, waitLastAssistant, waitAssistantIncludes,
} from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';

const all = ['start', 'secondTab', 'lostSubscription', 'permission', 'markdown', 'question', 'cancel', 'reload', 'changes'];
const steps = new Set(params.steps || all);

// The conversation is checked laid out whole (see run in lib/axe.mjs).
const tall = { height: 2400 };

await main(async () => {
  const result = { steps: [] };
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  const page = await ctx.newPage();
  watch(page, 'tab1');
  const audit = new Audit();
  const onScreen = (screen) => audit.check(page, screen);

  const t0 = Date.now();
  await login(page, token, { onScreen });
  result.loginMs = Date.now() - t0;
  const picked = await pickMachine(page, params.machine, { optional: !!params.machineOptional, onScreen });
  result.machinePicked = picked.picked;
  result.pickerShownAfterLogin = picked.shown;

  // start: a new session with a first prompt; its reply streams in.
  await newSession(page, { cwd: params.cwd, prompt: params.start.prompt }, { onScreen });
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
    await first.waitFor().catch(async (e) => {
      // Say where each tab is and what the browser's storage holds, not only that it timed out.
      const stored = (p) =>
        p.evaluate(() => new Promise((resolve) => {
          const r = indexedDB.open('betcode', 1);
          r.onerror = () => resolve(`open: ${r.error}`);
          r.onsuccess = () => {
            const q = r.result.transaction('kv').objectStore('kv').getAllKeys();
            q.onsuccess = () => resolve(`keys ${JSON.stringify(q.result)}`);
            q.onerror = () => resolve(`keys: ${q.error}`);
          };
        })).catch((err) => `evaluate: ${err}`);
      throw new Error(`the second tab shows neither the conversation nor the login: ${e.message}\n` +
        `tab2 at ${tab2.url()}, IndexedDB ${await stored(tab2)}; tab1 at ${page.url()}, IndexedDB ${await stored(page)}`);
    });
    if (await tab2.locator(tid('login-token')).isVisible()) {
      // The token is not shared between tabs: log in again.
      result.secondTabNeededLogin = true;
      await login(tab2, token);
      await tab2.goto(result.sessionURL, { waitUntil: 'domcontentloaded' });
    }
    await waitLastAssistant(tab2, params.start.want);
    result.steps.push('secondTab');
  }

  // lostSubscription: a tab whose subscriptions are lost on the way (the hello's stripped, the
  // first subscribe dropped) still shows the conversation: the app asks again when no replay
  // comes. The socket stays up and answers pings all along.
  if (steps.has('lostSubscription')) {
    const tab3 = await ctx.newPage();
    watch(tab3, 'tab3');
    const dropped = new Set();
    await tab3.routeWebSocket(/\/api\/ws$/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((msg) => {
        let m;
        try {
          m = JSON.parse(msg);
        } catch {
          server.send(msg);
          return;
        }
        if (m.type === 'hello' && m.subscriptions?.length) {
          dropped.add('hello');
          server.send(JSON.stringify({ ...m, subscriptions: [] }));
        } else if (m.type === 'subscribe' && !dropped.has(m.sessionId)) {
          dropped.add(m.sessionId);
        } else {
          server.send(msg);
        }
      });
    });
    const t0 = Date.now();
    await tab3.goto(result.sessionURL, { waitUntil: 'domcontentloaded' });
    await waitLastAssistant(tab3, params.start.want, 30000);
    result.lostSubscription = { dropped: [...dropped].length, shownMs: Date.now() - t0 };
    await tab3.close();
    result.steps.push('lostSubscription');
  }

  // permission: the tool waits for the user; allow it once.
  if (steps.has('permission')) {
    const p = params.permission;
    await send(page, p.prompt);
    const prompt = page.locator(tid('permission-prompt'));
    await prompt.first().waitFor();
    result.permission = { promptText: norm(await prompt.first().textContent()) };
    await page.locator(tid('allow-once')).first().waitFor();
    await audit.check(page, 'conversation with a permission prompt', tall);
    // The session list shows the session waiting for an answer; back to it.
    await page.locator('a[aria-label="Sessions"]').click();
    await page.locator(`${tid('session-item')} .badge`).first().waitFor();
    await audit.check(page, 'sessions, one waiting');
    await page.locator(tid('session-item')).first().click();
    await page.locator(tid('allow-once')).first().waitFor();
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

  // markdown: a streamed reply with a table and highlighted code blocks (one
  // with a line too long for a phone, which scrolls), the tool cards open.
  if (steps.has('markdown')) {
    const closed = page.locator(`${tid('tool-card')}:not([open]) > summary`);
    while (await closed.count()) await closed.first().click();
    const before = await page.locator(tid('assistant-text')).count();
    await sync('markdown-turn'); // the Go test scripts the reply
    await send(page, params.markdown.prompt);
    // Streamed to its end: a new last text, not busy, with its code.
    await page.waitForFunction(
      ([sel, before]) => {
        const all = document.querySelectorAll(sel);
        const last = all[all.length - 1];
        return all.length > before && last.getAttribute('aria-busy') !== 'true' && last.querySelectorAll('pre.code').length >= 2;
      },
      [tid('assistant-text'), before],
    );
    const md = page.locator(tid('assistant-text')).last();
    result.markdown = {
      codeBlocks: await md.locator('pre.code').count(),
      tokens: await md.locator('pre.code span[class^="t-"]').count(),
      tables: await md.locator('table').count(),
      openToolCards: await page.locator(`${tid('tool-card')}[open]`).count(),
    };
    if (!result.markdown.tokens) throw new Error(`the markdown reply shows no highlighted code: ${JSON.stringify(result.markdown)}`);
    await audit.check(page, 'conversation with markdown, code and open tool cards', tall);
    result.steps.push('markdown');
  }

  // question: AskUserQuestion with two questions (one multi-select); pick
  // options in both and answer.
  if (steps.has('question')) {
    const q = params.question;
    await send(page, q.prompt);
    const box = page.locator(tid('question')).first();
    await box.waitFor();
    await page.locator(tid('question-submit')).first().waitFor();
    result.question = { texts: (await page.locator(tid('question')).allTextContents()).map(norm) };
    await audit.check(page, 'conversation with a question', tall);
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

  // changes: the session's directory as a git checkout with a change (the Go
  // test makes it one); one file's diff open.
  if (steps.has('changes')) {
    await sync('changes');
    await page.locator(tid('changes-tab')).click();
    const files = page.getByRole('list', { name: 'Changed files' }).getByRole('button');
    await files.first().waitFor();
    result.changes = { files: (await files.allTextContents()).map(norm) };
    await files.first().click();
    await page.locator('pre.diff').first().waitFor();
    await audit.check(page, 'changes');
    result.steps.push('changes');
  }

  // Settings, once its sections have loaded.
  await page.locator(tid('settings')).click();
  await page.locator('#usage-h').waitFor();
  await page.waitForFunction(() => !document.querySelector('main [role="progressbar"]'));
  await audit.check(page, 'settings');

  result.a11y = { screens: audit.screens };
  audit.assertClean();
  result.alerts = alerts;
  log('flow done', { steps: result.steps });
  return result;
});
