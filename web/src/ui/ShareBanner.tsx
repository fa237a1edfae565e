// The teammate's side of a shared session (docs/security.md, "Sharing a session"): a browser paired
// with a session share's code sees that one session, read-only or able to answer its prompts, and
// this banner says which, until when, and whether the channel holds (a stopped share refuses it). The machine enforces it (agent/share.Gate); the app only
// hides what it would refuse.
import type { SharedSession } from '../e2ee';
import { paired, state } from '../store';
import { ChanState } from './common';

/** The share this browser was paired for on machine, if it was paired with a share's code. */
export function shareOf(machine: string): SharedSession | undefined {
  return paired(machine)?.share;
}

/** Whether the current machine's pairing is a read-only share: its prompts cannot be answered here. */
export function readOnlyShare(): boolean {
  return shareOf(state.machineId)?.mode === 'read';
}

/** Said instead of the answer buttons of an open prompt in a read-only share. */
export const READ_ONLY_WAIT = 'Waiting for the owner to answer: this session was shared with you read-only';

/** A share's time (ISO), shortly: its date and minute, or '' when there is none. */
export function shareTime(iso?: string): string {
  const t = iso ? new Date(iso) : undefined;
  return t && !isNaN(t.getTime()) ? t.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : '';
}

export function ShareBanner({ share }: { share: SharedSession }) {
  const end = shareTime(share.expiresAt);
  return (
    <p class="share-banner" role="status" data-testid="share-banner" data-mode={share.mode}>
      <strong>Shared with you</strong>
      {share.mode === 'read' ? ': read-only. You can watch this session, not answer its prompts or write to it.' : ': you can answer its prompts, not write to it.'}
      {end && <> Until {end}.</>} <ChanState />
    </p>
  );
}
