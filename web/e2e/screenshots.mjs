// screenshots.mjs: the main screens of the web app at phone (390×844) and
// laptop (1280×800) size, light and dark, as PNGs in params.outDir:
// <screen>-<phone|laptop>-<light|dark>.png for the screens login, machines,
// sessions, conversation (with a permission prompt), new-session, settings.
// The Go test (TestBrowserScreenshots, make screenshots) prepares a machine
// with a session waiting on a permission prompt (params.sessionName);
// params.sizes and params.schemes narrow the set.
//
// One browser: the size and the colour scheme change per shot (the app's
// theme follows the system's unless set).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch, phone, laptop, params, token, main, watch, baseURL, log, recordAlerts } from './lib/harness.mjs';
import { tid, login, pickMachine } from './lib/app.mjs';

const looks = [];
for (const [size, viewport] of Object.entries({ phone, laptop })) {
  if (params.sizes && !params.sizes.includes(size)) continue;
  for (const scheme of params.schemes || ['light', 'dark']) looks.push({ size, viewport, scheme });
}

await main(async () => {
  mkdirSync(params.outDir, { recursive: true });
  const shots = [];
  const ctx = await launch({ viewport: phone });
  const alerts = await recordAlerts(ctx);
  const page = await ctx.newPage();
  watch(page, 'screenshots');
  const shot = async (screen, look) => {
    // A toast (an error the app reports) goes away by itself; the Go test's
    // log shows it.
    const toast = page.locator('.toast');
    if (await toast.count()) {
      log('toast', { screen, text: await toast.first().textContent() });
      await toast.first().waitFor({ state: 'detached', timeout: 15000 });
    }
    // Fonts and layout settle before the picture is taken.
    await page.evaluate(() => document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))));
    const path = join(params.outDir, `${screen}-${look.size}-${look.scheme}.png`);
    await page.screenshot({ path, animations: 'disabled', caret: 'hide' });
    shots.push(path);
  };
  const each = async (fn) => {
    for (const look of looks) {
      await page.setViewportSize(look.viewport);
      await page.emulateMedia({ colorScheme: look.scheme });
      await fn(look);
    }
  };

  await page.goto(new URL('#/login', baseURL).href, { waitUntil: 'load' });
  await page.locator(tid('login-token')).waitFor();
  // The server line under the form says what the app talks to.
  await page.locator('.server-info', { hasNotText: 'Contacting' }).waitFor();
  await each((look) => shot('login', look));

  await login(page, token);
  await pickMachine(page, params.machine);
  const sessionsURL = page.url();
  const item = page.locator(tid('session-item'), { hasText: params.sessionName }).first();
  await item.click();
  await page.locator(tid('permission-prompt')).first().waitFor();
  const convURL = page.url();
  const base = sessionsURL.slice(0, sessionsURL.indexOf('#'));

  await each(async (look) => {
    await page.goto(base + '#/machines');
    await page.locator(tid('machine-item'), { hasText: params.machine }).waitFor();
    await shot('machines', look);

    await page.goto(sessionsURL);
    await item.waitFor();
    await shot('sessions', look);

    await page.goto(convURL);
    await page.locator(tid('allow-once')).first().waitFor();
    await shot('conversation', look);

    await page.goto(sessionsURL);
    await page.locator(tid('new-session')).first().click();
    if (params.cwd) {
      await page.locator(tid('cwd-input')).fill(params.cwd);
      await page.locator('#cwd-state', { hasText: /\w/ }).waitFor(); // the directory was checked
    }
    await page.locator(tid('prompt-input')).fill(params.prompt || '');
    await shot('new-session', look);

    await page.goto(base + '#/settings');
    // theme-toggle is in every top bar; the settings page has the theme
    // choice and (where the browser can take push) push-toggle.
    await page.locator('#theme-h').waitFor();
    await shot('settings', look);
  });
  return { shots, alerts };
});
