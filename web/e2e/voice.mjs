// Voice dictation end to end: a browser paired with the machine (code pasted) holds the dictation
// button while chromium's fake microphone plays params.wav; the recording goes through the
// machine's end-to-end channel to the machine, which transcribes it with its endpoint (the Go
// test's fake), and the text lands in the prompt box. Then the keyboard path (Space starts and
// stops), the message box of the conversation, and Settings' voice section; axe-core on each,
// phone and laptop (lib/a11y.mjs checks light, dark and both explicit themes).
// Every /api request and WebSocket is reported, and every WebSocket frame the page sent or
// received is written (base64) to params.framesFile, for the Go test to check that the relay
// carried no audio and no transcript in clear.
//
// params: code (betcode-pair:1:…), deviceName, cwd, wav (the fake microphone's file), framesFile,
// texts (the fake endpoint's answers, in order).
import { writeFileSync } from 'node:fs';
import { baseURL, laptop, launch, log, main, params, phone, recordAlerts, screenshots, watch } from './lib/harness.mjs';
import { norm, pairByCode, tid } from './lib/app.mjs';
import { Audit, withAxe } from './lib/a11y.mjs';

await main(async () => {
  const result = { steps: [] };
  const ctx = await launch({
    viewport: phone,
    args: ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${params.wav}`],
  });
  const origin = new URL(baseURL).origin;
  await ctx.grantPermissions(['microphone'], { origin });
  const alerts = await recordAlerts(ctx);
  await withAxe(ctx);
  const requests = [];
  ctx.on('request', (r) => {
    const u = new URL(r.url());
    if (u.origin === origin && u.pathname.startsWith('/api')) requests.push(`${r.method()} ${u.pathname}`);
  });
  const sockets = [];
  const frames = { sent: [], received: [] };
  const b64 = (p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p)).toString('base64');
  const page = await ctx.newPage();
  page.on('websocket', (ws) => {
    sockets.push(new URL(ws.url()).pathname);
    ws.on('framesent', (f) => frames.sent.push(b64(f.payload)));
    ws.on('framereceived', (f) => frames.received.push(b64(f.payload)));
  });
  watch(page, 'phone');
  const audit = new Audit();
  const prompt = page.locator(tid('prompt-input'));
  const button = page.locator(tid('voice-button'));
  const idle = async (scope) => {
    await scope.locator(`${tid('voice-button')}[data-state="idle"], ${tid('voice-error')}`).first().waitFor({ timeout: 60000 });
    const err = scope.locator(tid('voice-error'));
    if (await err.count()) throw new Error('dictation failed: ' + norm(await err.first().textContent()));
  };

  // Pair by pasting the machine's code; the machine's sessions open through the channel.
  await pairByCode(page, params.code, { deviceName: params.deviceName });
  await page.locator(`${tid('chan-state')}[data-state="open"]`).first().waitFor();
  result.steps.push('paired');

  // The new-session form: hold the button while the fake microphone plays, release.
  await page.locator(tid('new-session')).first().click();
  await page.locator(tid('cwd-input')).fill(params.cwd);
  await button.waitFor();
  result.buttonLabel = await button.getAttribute('aria-label');
  await audit.check(page, 'new session with the dictation button (phone)');
  if (params.outDir) await screenshots(page, params.outDir, 'voice-new-session');
  const box = await button.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const t0 = Date.now();
  await page.mouse.down();
  await page.locator(`${tid('voice-button')}[data-state="recording"]`).waitFor();
  result.recordingStatus = norm(await page.locator(tid('voice-status')).textContent());
  result.recordingPressed = await button.getAttribute('aria-pressed');
  await page.waitForTimeout(2000); // speak for 2 s: the recording's length, not a synchronisation
  await page.mouse.up();
  await page.locator(`${tid('voice-button')}[data-state="transcribing"], ${tid('voice-button')}[data-state="idle"]`).first().waitFor();
  await idle(page);
  result.holdMs = Date.now() - t0;
  result.afterHold = await prompt.inputValue();
  log('dictated by holding', { text: result.afterHold, ms: result.holdMs });
  result.steps.push('hold');

  // The keyboard: Space on the focused button starts, Space again stops; the text is appended.
  await button.focus();
  await page.keyboard.press('Space');
  await page.locator(`${tid('voice-button')}[data-state="recording"]`).waitFor();
  await audit.check(page, 'new session while recording (phone)', { include: ['.voice-row', '.voice-status'] });
  await button.focus(); // the audit's theme switch took the focus
  await page.keyboard.press('Space');
  await idle(page);
  result.afterKeyboard = await prompt.inputValue();
  result.steps.push('keyboard');

  await page.setViewportSize(laptop);
  await audit.check(page, 'new session with the dictation button (laptop)');
  await page.setViewportSize(phone);

  // Start the session with the dictated prompt; the conversation's message box has a button too.
  await page.locator(tid('start-session')).click();
  await page.locator(tid('conversation')).waitFor();
  await page.locator(tid('assistant-text')).first().waitFor({ timeout: 60000 });
  const composer = page.locator('form.composer');
  await composer.locator(tid('voice-button')).waitFor();
  await audit.check(page, 'conversation composer with the dictation button (phone)');
  await composer.locator(tid('voice-button')).focus();
  await page.keyboard.press('Enter');
  await composer.locator(`${tid('voice-button')}[data-state="recording"]`).waitFor();
  await page.waitForTimeout(1500);
  await page.keyboard.press('Enter');
  await idle(composer);
  result.message = await page.locator(tid('message-input')).inputValue();
  // The endpoint fails (the Go test queued a 503): the error is said, the box is unchanged.
  await composer.locator(tid('voice-button')).focus();
  await page.keyboard.press('Enter');
  await composer.locator(`${tid('voice-button')}[data-state="recording"]`).waitFor();
  await page.waitForTimeout(1000);
  await page.keyboard.press('Enter');
  await composer.locator(tid('voice-error')).waitFor({ timeout: 60000 });
  result.errorText = norm(await composer.locator(tid('voice-error')).textContent());
  result.messageAfterError = await page.locator(tid('message-input')).inputValue();
  await audit.check(page, 'conversation composer with a dictation error (phone)', { include: ['form.composer'] });
  await page.setViewportSize(laptop);
  await audit.check(page, 'conversation composer with the dictation button (laptop)');
  await page.setViewportSize(phone);
  result.steps.push('composer');

  // Settings: the browser's speech recognition is off, with the warning.
  await page.goto(new URL('#/settings', baseURL).href);
  const toggle = page.locator(tid('voice-browser-toggle'));
  await toggle.waitFor();
  result.browserRecognition = await toggle.isChecked();
  result.settingsWarning = norm(await page.locator('#voice-warn').textContent());
  await audit.check(page, 'settings with the voice section (phone)');
  if (params.outDir) {
    await page.locator('#voice-warn').scrollIntoViewIfNeeded();
    await screenshots(page, params.outDir, 'voice-settings');
  }
  result.steps.push('settings');

  writeFileSync(params.framesFile, JSON.stringify(frames));
  result.framesSent = frames.sent.length;
  result.apiRequests = requests;
  result.webSockets = sockets;
  result.alerts = alerts;
  audit.assertClean();
  return result;
});
