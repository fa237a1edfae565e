// The inbox's render budget (issue 24): 20 machines × 50 sessions, each with a waiting permission
// prompt, fed to the inbox through its benchmark hook (window.betcodeInboxFeed: local to the
// page, nothing is sent) on a CPU throttled 4× (Emulation.setCPUThrottlingRate). Each run reports
// `rendered` (ms from the data to the DOM holding the newest prompt: a MutationObserver sees it
// at once) and `painted` (to the next frame after it). Used by inbox.mjs and inbox-perf.mjs.

/** measureInbox runs the measurement `runs` times on page (at #/inbox) and returns every run and the median. */
export async function measureInbox(ctx, page, runs = 3, rate = 4) {
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: rate });
  const out = [];
  try {
    for (let run = 0; run < runs; run++) {
      // The renderer's main-thread CPU time of the run, from a trace: a busy machine stretches the
      // wall time, not this. CPU throttling suspends the thread, so this is the unthrottled cost.
      const events = [];
      const onData = (e) => events.push(...e.value);
      cdp.on('Tracing.dataCollected', onData);
      const traced = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
      await cdp.send('Tracing.start', { categories: '__metadata,toplevel,blink.user_timing,disabled-by-default-devtools.timeline', transferMode: 'ReportEvents' });
      const r = await page.evaluate(async (run) => {
          const now = Date.now();
          const machines = [];
          for (let m = 0; m < 20; m++) {
            const sessions = [];
            for (let s = 0; s < 50; s++) {
              const at = new Date(now - (m * 50 + s) * 1000 + run).toISOString();
              sessions.push({
                id: `r${run}-s${m}-${s}`, name: `Session ${m}.${s}`, cwd: '/home/u/p', model: 'm', status: 'waiting', agentStatus: 'waiting_for_user',
                costUsd: 0, inputTokens: 0, outputTokens: 0, messageCount: 3, lastMessage: 'Running the tests', pendingPrompts: 1,
                createdAt: at, updatedAt: at,
                pending: [{ type: 'permission_request', requestId: `r${run}-${m}-${s}`, toolName: 'Bash', description: 'Run the tests', input: { command: 'make test' }, ts: at }],
              });
            }
            machines.push({ machineId: `bench-r${run}-m${m}`, sessions });
          }
          const want = `r${run}-0-0`;
          const shown = new Promise((resolve) => {
            const mo = new MutationObserver(() => {
              if (document.querySelector(`[data-prompt="${want}"]`)) {
                mo.disconnect();
                resolve(performance.now());
              }
            });
            mo.observe(document.body, { childList: true, subtree: true });
          });
          // Settle first: the previous run's work (layout, a collection) is not this one's.
          await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)));
          const t0 = performance.now();
          performance.mark('inbox-feed');
          window.betcodeInboxFeed(machines);
          const rendered = (await shown) - t0;
          await new Promise((r) => requestAnimationFrame(() => r()));
          performance.mark('inbox-painted');
          return {
            rendered: Math.round(rendered), painted: Math.round(performance.now() - t0),
            items: document.querySelectorAll('[data-testid="inbox-item"]').length,
            count: document.querySelector('[data-testid="inbox-count"]')?.textContent,
          };
        }, run);
      await cdp.send('Tracing.end');
      await traced;
      cdp.off('Tracing.dataCollected', onData);
      r.cpuMs = Math.round(mainThreadCpu(events));
      out.push(r);
    }
  } finally {
    await cdp.send('Emulation.setCPUThrottlingRate', { rate: 1 });
  }
  const med = (k) => out.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(out.length / 2)];
  return {
    runs: out, medianRendered: med('rendered'), medianPainted: med('painted'), medianCpuMs: med('cpuMs'),
    cpuThrottle: rate, machines: 20, sessionsPerMachine: 50,
  };
}

/**
 * mainThreadCpu sums the thread time of the renderer main thread's top-level tasks between the
 * marks inbox-feed and inbox-painted (the feed, the render, style, layout and paint), in ms.
 */
function mainThreadCpu(events) {
  const main = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const mark = (name) => events.find((e) => e.name === name && main.has(`${e.pid}:${e.tid}`))?.ts;
  const from = mark('inbox-feed') ?? -Infinity;
  const to = mark('inbox-painted') ?? Infinity;
  return events
    .filter((e) => e.ph === 'X' && e.name === 'RunTask' && main.has(`${e.pid}:${e.tid}`) && e.ts + (e.dur ?? 0) >= from && e.ts <= to)
    .reduce((sum, e) => sum + (e.tdur ?? e.dur ?? 0) / 1000, 0);
}
