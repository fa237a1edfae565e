// perf.mjs: the web app's measurements on a phone viewport.
//
//  1. First load: the compressed bytes of JS and CSS the browser fetched
//     (fresh profile, empty cache), as transferred (Content-Encoding on).
//  2. Time to first token: for each of params.ttftTurns turns the Go test
//     sends a message (gRPC QueueMessage) whose reply starts with a marker;
//     the page reports when the marker entered the DOM (wall clock, ms since
//     the epoch), the Go test compares with its own gRPC client's first
//     TextDelta.
//  3. A turn streaming params.burst.deltas text deltas at about 1,000/s: the
//     long tasks ('longtask' PerformanceObserver) while it renders.
import { launch, phone, params, token, main, watch, log, sync, baseURL, timeout } from './lib/harness.mjs';
import { tid, login, pickMachine, waitLastAssistant, norm } from './lib/app.mjs';

// Installed before any script of the page: collects long tasks.
function observeLongTasks() {
  window.__betcodeLongTasks = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__betcodeLongTasks.push({ start: e.startTime, duration: e.duration, name: e.name });
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) {
    window.__betcodeLongTasks = null;
  }
}

// armMarker resolves with the wall-clock time (ms since the epoch) at which
// some assistant text first contained marker.
function armMarker(marker) {
  const sel = '[data-testid="assistant-text"]';
  const has = () => [...document.querySelectorAll(sel)].some((e) => (e.textContent || '').includes(marker));
  window.__betcodeMarker = new Promise((resolve) => {
    if (has()) return resolve({ at: performance.timeOrigin + performance.now(), already: true });
    const mo = new MutationObserver(() => {
      if (has()) {
        const at = performance.timeOrigin + performance.now();
        mo.disconnect();
        // When the frame that shows it is painted, too.
        requestAnimationFrame(() => resolve({ at, painted: performance.timeOrigin + performance.now() }));
      }
    });
    mo.observe(document.body, { childList: true, subtree: true, characterData: true });
  });
}

// mainThreadTasks summarises the trace's top-level tasks (RunTask) on the
// renderer main threads: count, and the longest by thread (CPU) time and by
// wall time, in ms.
function mainThreadTasks(events) {
  const main = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const runs = events.filter((e) => e.ph === 'X' && e.name === 'RunTask' && main.has(`${e.pid}:${e.tid}`));
  const cpu = runs.map((e) => (e.tdur ?? 0) / 1000);
  const wall = runs.map((e) => (e.dur ?? 0) / 1000);
  return {
    tasks: runs.length,
    hasThreadTime: runs.some((e) => e.tdur !== undefined),
    worstCpuMs: Math.max(0, ...cpu),
    worstWallMs: Math.max(0, ...wall),
    overBudgetCpu: cpu.filter((ms) => ms > 50).length,
  };
}

await main(async () => {
  const result = {};
  const ctx = await launch({ viewport: phone });
  await ctx.addInitScript(observeLongTasks);
  const page = await ctx.newPage();
  watch(page, 'perf');
  const frames = { n: 0, sockets: 0 };
  page.on('websocket', (ws) => {
    frames.sockets++;
    ws.on('framereceived', () => frames.n++);
  });

  // 1. First load.
  const loads = [];
  const onResponse = async (resp) => {
    const type = resp.request().resourceType();
    if (type !== 'script' && type !== 'stylesheet') return;
    loads.push((async () => {
      const sizes = await resp.request().sizes().catch(() => null);
      const headers = await resp.allHeaders().catch(() => ({}));
      let decoded = null;
      try { decoded = (await resp.body()).length; } catch {}
      return {
        url: resp.url().replace(baseURL, ''), type, status: resp.status(),
        encoding: headers['content-encoding'] || '', transferred: sizes ? sizes.responseBodySize : null,
        headers: sizes ? sizes.responseHeadersSize : null, decoded, fromServiceWorker: resp.fromServiceWorker(),
      };
    })());
  };
  page.on('response', onResponse);
  await page.goto(new URL('#/login', baseURL).href, { waitUntil: 'load' });
  await page.locator(tid('login-token')).waitFor();
  page.off('response', onResponse);
  const files = await Promise.all(loads);
  result.firstLoad = {
    files,
    jsBytes: files.filter((f) => f.type === 'script').reduce((n, f) => n + (f.transferred ?? 0), 0),
    cssBytes: files.filter((f) => f.type === 'stylesheet').reduce((n, f) => n + (f.transferred ?? 0), 0),
    decodedBytes: files.reduce((n, f) => n + (f.decoded ?? 0), 0),
  };
  result.firstLoad.bytes = result.firstLoad.jsBytes + result.firstLoad.cssBytes;
  log('first load', { bytes: result.firstLoad.bytes });

  await login(page, token);
  await pickMachine(page, params.machine, { optional: !!params.machineOptional });
  await page.locator(tid('session-item'), { hasText: params.sessionName }).first().click();
  await page.locator(tid('conversation')).waitFor();
  // The page follows the session live once a warm-up reply shows.
  await sync('warmup');
  await waitLastAssistant(page, params.warmupWant);

  // 2. Time to first token.
  result.ttft = [];
  for (let i = 0; i < params.ttftTurns; i++) {
    const marker = `${params.markerPrefix}${i}`;
    await page.evaluate(armMarker, marker);
    const answer = await sync('ttft', { turn: i, marker });
    const seen = await page.evaluate((ms) => Promise.race([
      window.__betcodeMarker,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the marker never showed')), ms)),
    ]), timeout);
    await waitLastAssistant(page, answer.want);
    result.ttft.push({ turn: i, marker, ...seen });
  }

  // 3. A 1,000 deltas/s turn, under a Chrome trace: the 'longtask'
  // observer gives each task's wall time, which on a busy machine includes
  // the time the renderer waited for a CPU; the trace's thread time (tdur)
  // of each task on the page's main thread is the work the page did.
  const cdp = await ctx.newCDPSession(page);
  const traceEvents = [];
  cdp.on('Tracing.dataCollected', (e) => traceEvents.push(...e.value));
  const traced = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
  await cdp.send('Tracing.start', { categories: '__metadata,toplevel,disabled-by-default-devtools.timeline', transferMode: 'ReportEvents' });
  const t0 = await page.evaluate(() => performance.now());
  frames.n = 0;
  const burst = await sync('burst');
  const started = Date.now();
  await waitLastAssistant(page, burst.want, 60000);
  const renderMs = Date.now() - started;
  const t1 = await page.evaluate(() => performance.now());
  const tasks = await page.evaluate(() => window.__betcodeLongTasks);
  await cdp.send('Tracing.end');
  await traced;
  result.burst = {
    taskCPU: mainThreadTasks(traceEvents),
    renderMs,
    longTasksSupported: tasks !== null,
    longTasks: (tasks || []).filter((e) => e.start >= t0 && e.start <= t1),
    allLongTasks: tasks || [],
    framesDuringBurst: frames.n,
    webSockets: frames.sockets,
    renderedChars: norm(burst.want).length,
  };
  log('burst done', { longTasks: result.burst.longTasks.length, renderMs });
  return result;
});
