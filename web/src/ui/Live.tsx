import { hasAccess, paired, useAppState } from '../store';

/**
 * Whether what the screen shows is live: "live", "reconnecting…" (the stream is being re-opened,
 * or caught up after a wake), or "offline" (the browser has no network), with the messages the
 * outbox holds. A polite live region: a screen reader hears the change, not every frame.
 */
export function LiveStrip() {
  const s = useAppState();
  if (!hasAccess() || !s.machineId) return null;
  const e2e = !!paired(s.machineId);
  const q = s.outbox;
  const queued = q ? `${q} message${q > 1 ? 's' : ''} queued` : '';
  let st: 'live' | 'reconnecting' | 'offline';
  if (!s.online) st = 'offline';
  else if (s.conn === 'open' && !s.resyncing && (!e2e || s.chan === 'open')) st = 'live';
  else st = 'reconnecting';
  const words = st === 'reconnecting' ? 'reconnecting…' : st;
  return (
    <div class={'live-strip ' + st} role="status" aria-live="polite" data-testid="live-state" data-state={st} data-queued={q}>
      <span class="live-dot" aria-hidden="true" />
      {queued ? `${words}, ${queued}` : words}
    </div>
  );
}
