// What a person does in the web app, by the app's data-testid attributes.
import { baseURL, timeout, log } from './harness.mjs';

export const tid = (id) => `[data-testid="${id}"]`;

/** norm collapses white space, so that markup around words does not matter. */
export const norm = (s) => String(s ?? '').replace(/\s+/g, ' ').trim();

/**
 * pairByCode pairs the app in page with a machine by pasting its code (naming this device
 * deviceName when given) and waits for the machine's sessions; a refused code throws with what the
 * app said, prefixed by who.
 */
export async function pairByCode(page, code, { deviceName = '', who = '' } = {}) {
  await page.goto(new URL('#/pair', baseURL).href, { waitUntil: 'domcontentloaded' });
  await page.locator(tid('pair-code')).waitFor();
  if (deviceName) await page.locator(tid('pair-device-name')).fill(deviceName);
  await page.locator(tid('pair-code')).fill(code);
  await page.locator(tid('pair-submit')).click();
  await page.locator(`${tid('new-session')}, ${tid('pair-error')}`).first().waitFor({ timeout: 60000 });
  if (await page.locator(tid('pair-error')).count()) {
    throw new Error(`${who ? who + ': ' : ''}pairing failed: ` + norm(await page.locator(tid('pair-error')).textContent()));
  }
  log('paired', { who, url: page.url() });
}

/**
 * login opens the app and logs in with token. The optional onScreen(name) runs on the way at each
 * screen (here "login", once the server info is in), to check it.
 */
export async function login(page, token, { onScreen } = {}) {
  // On a relay with nothing paired the app's home is "Pair a machine": the login has its route.
  await page.goto(new URL('#/login', baseURL).href, { waitUntil: 'domcontentloaded' });
  const input = page.locator(tid('login-token'));
  await input.waitFor();
  log('login screen');
  if (onScreen) {
    await page.locator('.server-info', { hasNotText: 'Contacting' }).waitFor();
    await onScreen('login');
  }
  await input.fill(token);
  await page.locator(tid('login-submit')).click();
  await input.waitFor({ state: 'detached' });
  log('logged in');
}

/**
 * pickMachine taps the machine whose item shows name (the first machine
 * when name is empty) in the machine picker. An app that went straight to a
 * machine's sessions (it remembered or was given a current machine) is
 * taken back to the picker by its "Machines" link; with optional set (the
 * agent serves one machine) a sessions screen without that link is fine.
 * It returns whether a machine was picked and whether the picker came up
 * by itself. The optional onScreen("machines") runs once the picker shows
 * its machines.
 */
export async function pickMachine(page, name, { optional = false, onScreen } = {}) {
  const items = page.locator(tid('machine-item'));
  const item = name ? page.locator(tid('machine-item'), { hasText: name }) : items;
  await page.locator(`${tid('machine-item')}, ${tid('new-session')}`).first().waitFor();
  const shown = (await items.count()) > 0;
  if (!shown) {
    const back = page.locator('a[aria-label="Machines"]');
    if (optional && (await back.count()) === 0) return { picked: false, shown };
    await back.first().click();
    await items.first().waitFor();
  }
  await item.first().waitFor();
  if (onScreen) await onScreen('machines');
  await item.first().click();
  await page.locator(tid('new-session')).first().waitFor();
  log('picked machine', { machine: name });
  return { picked: true, shown };
}

/**
 * newSession fills the new-session form and starts the session. The optional
 * onScreen("new-session") runs on the filled form, once the directory was
 * checked.
 */
export async function newSession(page, { cwd, prompt }, { onScreen } = {}) {
  await page.locator(tid('new-session')).first().click();
  const cwdInput = page.locator(tid('cwd-input'));
  await cwdInput.waitFor();
  await cwdInput.fill(cwd);
  if (prompt !== undefined) await page.locator(tid('prompt-input')).fill(prompt);
  if (onScreen) {
    await page.locator('#cwd-state', { hasText: /\w/ }).waitFor();
    await onScreen('new-session');
  }
  await page.locator(tid('start-session')).click();
  await page.locator(tid('conversation')).waitFor();
  log('started session', { url: page.url() });
}

/** send types text into the message box and sends it. */
export async function send(page, text) {
  const box = page.locator(tid('message-input'));
  await box.waitFor();
  await box.fill(text);
  await page.locator(tid('send-message')).click();
}

/** texts returns the text of every element with the test id, in order. */
export function texts(page, id) {
  return page.evaluate(
    (sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent ?? ''),
    tid(id),
  );
}

/**
 * waitTexts waits until the normalised texts of every element with the test
 * id satisfy the check (a name: the app's CSP forbids evaluating strings)
 * with arg, and returns them.
 */
export async function waitTexts(page, id, check, arg, ms = timeout) {
  try {
    await page.waitForFunction(
      ([sel, check, arg]) => {
        const got = [...document.querySelectorAll(sel)].map((e) => (e.textContent ?? '').replace(/\s+/g, ' ').trim());
        switch (check) {
          case 'last': return got.length > 0 && got[got.length - 1] === arg;
          case 'includes': return got.some((t) => t.includes(arg));
          case 'count': return got.length >= arg;
        }
        throw new Error('unknown check ' + check);
      },
      [tid(id), check, arg],
      { timeout: ms, polling: 'raf' },
    );
  } catch (err) {
    const got = (await texts(page, id).catch(() => [])).map(norm);
    throw new Error(`waiting for ${id} texts (${check} ${JSON.stringify(arg)}): ${err.message}\nhave: ${JSON.stringify(got)}`);
  }
  return (await texts(page, id)).map(norm);
}

/** waitLastAssistant waits until the last assistant text is exactly want. */
export function waitLastAssistant(page, want, ms) {
  return waitTexts(page, 'assistant-text', 'last', norm(want), ms);
}

/** waitAssistantIncludes waits until some assistant text contains part. */
export function waitAssistantIncludes(page, part, ms) {
  return waitTexts(page, 'assistant-text', 'includes', norm(part), ms);
}

/** sessionURL returns the page's URL (the app routes by hash or path). */
export const sessionURL = (page) => page.url();

/** visible reports whether an element with the test id is visible now. */
export async function visible(page, id) {
  return page.locator(tid(id)).first().isVisible();
}
