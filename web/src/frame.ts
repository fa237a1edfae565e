// The per-frame work budget. The store renders once per animation frame; work that may be big
// (parsing markdown blocks, say after a replay of a long conversation) asks hasBudget() first and,
// when the frame's ~8 ms are spent, shows a placeholder and retries on the next frame, so no task
// grows long however much arrives at once.

export const BUDGET_MS = 8;
let start = 0;
const retries = new Set<() => void>();

/** Called by the store at the start of each frame's render. */
export function frameBegin() {
  start = performance.now();
}

/** Whether this frame still has time for one more piece of deferrable work. */
export function hasBudget(): boolean {
  const now = performance.now();
  // A render outside the store's frame (an input event, say): a fresh budget.
  if (now - start > 100) start = now;
  return now - start < BUDGET_MS;
}

/** Runs f at the start of the next frame's render (the caller also asks for a frame). */
export function retryNextFrame(f: () => void) {
  retries.add(f);
}

/** The retries queued for this frame, taken. */
export function takeRetries(): (() => void)[] {
  const l = [...retries];
  retries.clear();
  return l;
}
