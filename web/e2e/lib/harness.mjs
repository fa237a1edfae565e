// The harness the scripts share: Debian's chromium through playwright-core,
// a JSON-lines protocol with the Go test that runs the script, and failure
// artifacts.
//
// Protocol. Every line on stdout is one JSON object:
//   {"log": "..."}                 progress, for the Go test's log
//   {"wait": "NAME", ...}          a sync point: the script reads one JSON line
//                                  from stdin (the Go test's answer) and goes on
//   {"result": {...}}              the outcome, printed once at the end
//   {"error": "...", "artifacts"}  the script failed (exit status 1)
// Inputs come from the environment:
//   BETCODE_BASE_URL   the web app's URL (the relay's or the agent's)
//   BETCODE_TOKEN      the token to log in with
//   BETCODE_E2E        a JSON object of the script's parameters
//   BETCODE_ARTIFACTS  where a failure leaves a screenshot and the DOM
//   BETCODE_CHROMIUM   the browser (default /usr/bin/chromium)
//   BETCODE_CHROMIUM_ARGS  more browser flags, one per line (the relay's test
//                      passes --ignore-certificate-errors-spki-list with its
//                      certificate's key, so the page and its service worker
//                      see a valid certificate)
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export const baseURL = need('BETCODE_BASE_URL');
export const token = process.env.BETCODE_TOKEN ?? '';
export const params = JSON.parse(process.env.BETCODE_E2E || '{}');
const artifactsDir = process.env.BETCODE_ARTIFACTS || '';

/** Default timeout of every wait, in ms. */
export const timeout = Number(params.timeoutMs || 30000);

export const phone = { width: 390, height: 844 };
export const laptop = { width: 1280, height: 800 };

function need(name) {
  const v = process.env[name];
  if (!v) fail(new Error(`${name} is not set`));
  return v;
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

export function log(msg, extra = {}) {
  emit({ log: msg, ...extra });
}

// Lines from the Go test, read lazily.
let lines;
const pending = [];
const waiters = [];
function stdinLines() {
  if (lines) return;
  lines = createInterface({ input: process.stdin });
  lines.on('line', (l) => {
    if (waiters.length) waiters.shift().resolve(l);
    else pending.push(l);
  });
  lines.on('close', () => {
    while (waiters.length) waiters.shift().reject(new Error('stdin closed by the Go test'));
  });
}

/** sync prints a wait and returns the Go test's JSON answer. */
export async function sync(name, data = {}) {
  stdinLines();
  emit({ wait: name, ...data });
  const line = pending.length
    ? pending.shift()
    : await new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  const answer = JSON.parse(line);
  if (answer.error) throw new Error(`the Go test stopped at ${name}: ${answer.error}`);
  return answer;
}

const browserArgs = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

const open = new Set();

/**
 * launch starts chromium with a fresh --user-data-dir (a persistent context
 * on a new temporary directory, removed by close) and returns the context.
 * args are more browser flags (pair.mjs: the fake camera).
 */
export async function launch({ viewport = phone, colorScheme = 'light', ignoreHTTPSErrors = true, args = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'betcode-chromium-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: process.env.BETCODE_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: [...browserArgs, ...(process.env.BETCODE_CHROMIUM_ARGS || '').split('\n').filter(Boolean), ...args],
    viewport,
    colorScheme,
    ignoreHTTPSErrors,
    serviceWorkers: 'allow',
    timeout: 30000,
  });
  ctx.setDefaultTimeout(timeout);
  log('browser up', { viewport, colorScheme });
  const entry = { ctx, dir };
  open.add(entry);
  ctx.closeAll = async () => {
    open.delete(entry);
    await ctx.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  return ctx;
}

/**
 * recordTraffic records every /api request ("METHOD /path") and WebSocket path of the app's pages
 * in ctx, for the Go tests to check that nothing of a paired machine went to the relay in clear.
 */
export function recordTraffic(ctx) {
  const origin = new URL(baseURL).origin;
  const traffic = { requests: [], sockets: [] };
  ctx.on('request', (r) => {
    const u = new URL(r.url());
    if (u.origin === origin && u.pathname.startsWith('/api')) traffic.requests.push(`${r.method()} ${u.pathname}`);
  });
  ctx.on('page', (p) => p.on('websocket', (ws) => traffic.sockets.push(new URL(ws.url()).pathname)));
  return traffic;
}

/**
 * screenshots saves page as it is in the four looks of docs/screenshots: <name>-<phone|laptop>-
 * <light|dark>.png in outDir (make screenshots passes it); the page goes back to phone and light.
 */
export async function screenshots(page, outDir, name) {
  mkdirSync(outDir, { recursive: true });
  for (const [size, viewport] of [['phone', phone], ['laptop', laptop]]) {
    for (const scheme of ['light', 'dark']) {
      await page.setViewportSize(viewport);
      await page.emulateMedia({ colorScheme: scheme });
      // Fonts and layout settle before the picture is taken.
      await page.evaluate(() => document.fonts.ready.then(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))));
      await page.screenshot({ path: join(outDir, `${name}-${size}-${scheme}.png`), animations: 'disabled', caret: 'hide' });
    }
  }
  await page.setViewportSize(phone);
  await page.emulateMedia({ colorScheme: 'light' });
  log('screenshots', { name });
}

/** Pages whose DOM a failure saves. */
export const watched = new Set();

/** watch records a page's console errors and warnings, uncaught errors and last WebSocket frames for the report. */
export function watch(page, name) {
  const info = { name, page, errors: [], frames: [] };
  page.on('pageerror', (e) => info.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // Warnings too: the app says there why it could not read its storage, for one.
    if (m.type() === 'error' || m.type() === 'warning') info.errors.push(`console.${m.type()}: ${m.text()}`);
  });
  // The last WebSocket frames each way (their start), for a report of what the app asked for:
  // each with the seconds since the page was watched and its socket's number (#1 the first opened).
  const t0 = Date.now();
  let sockets = 0;
  page.on('websocket', (ws) => {
    const path = `#${++sockets} ${new URL(ws.url()).pathname}`;
    const at = () => ((Date.now() - t0) / 1000).toFixed(2) + 's';
    const push = (line) => {
      info.frames.push(`${at()} ${line}`);
      if (info.frames.length > 40) info.frames.shift();
    };
    const keep = (dir) => (f) => {
      // A hello's token is a secret: never in a report.
      const text = typeof f.payload === 'string' ? f.payload.replace(/"token":"[^"]*"/g, '"token":"…"') : `(${f.payload.length} bytes)`;
      push(`${dir} ${path} ${text.slice(0, 160)}`);
    };
    push(`opened ${path}`);
    ws.on('framesent', keep('sent'));
    ws.on('framereceived', keep('received'));
    ws.on('close', () => push(`closed ${path}`));
  });
  watched.add(info);
  return info;
}

async function saveArtifacts() {
  if (!artifactsDir) return [];
  mkdirSync(artifactsDir, { recursive: true });
  const out = [];
  for (const { name, page, errors } of watched) {
    if (page.isClosed()) continue;
    const base = join(artifactsDir, name);
    try {
      await page.screenshot({ path: base + '.png', fullPage: true, timeout: 5000 });
      out.push(base + '.png');
    } catch {}
    try {
      writeFileSync(base + '.html', await page.content());
      out.push(base + '.html');
    } catch {}
    if (errors.length) {
      writeFileSync(base + '.errors.txt', errors.join('\n') + '\n');
      out.push(base + '.errors.txt');
    }
  }
  return out;
}

function fail(err) {
  emit({ error: String(err?.stack || err) });
  process.exit(1);
}

/**
 * main runs body, prints its result (or the error with the artifacts) and
 * exits. Browsers are closed either way.
 */
export async function main(body) {
  let code = 0;
  try {
    const result = await body();
    emit({ result });
  } catch (err) {
    code = 1;
    const artifacts = await saveArtifacts().catch(() => []);
    // The app's own view of its stream (connection, each conversation's seq and replay).
    for (const w of watched) {
      if (w.page.isClosed()) continue;
      const st = await w.page.evaluate(() => globalThis.betcodeStreamState?.()).catch(() => undefined);
      if (st) w.errors.push(`stream state: ${JSON.stringify(st)}`);
    }
    const pageErrors = [...watched].flatMap((w) => [...w.errors, ...w.frames.map((f) => `ws ${f}`)].map((e) => `${w.name}: ${e}`));
    emit({ error: String(err?.stack || err), artifacts, pageErrors });
  } finally {
    for (const e of [...open]) await e.ctx.closeAll();
    lines?.close();
  }
  process.exit(code);
}

/**
 * recordAlerts collects every text the app shows as a toast or an alert
 * (role="alert") in any page of ctx, across reloads: a person would see
 * them, so a flow that should go smoothly expects none.
 */
export async function recordAlerts(ctx) {
  const alerts = [];
  await ctx.exposeBinding('__betcodeAlert', ({ page }, text) => {
    alerts.push({ url: page.url(), text });
  });
  await ctx.addInitScript(() => {
    const seen = new WeakMap();
    const check = () => {
      for (const el of document.querySelectorAll('.toast, [role="alert"]')) {
        const t = (el.textContent || '').trim();
        if (t && seen.get(el) !== t) {
          seen.set(el, t);
          window.__betcodeAlert(t);
        }
      }
    };
    new MutationObserver(check).observe(document, { childList: true, subtree: true, characterData: true });
  });
  return alerts;
}
