// The owner's side of sharing a session (docs/security.md, "Sharing a session"): make a one-time
// share code for a teammate (read-only, or able to answer prompts, for a while), see the
// session's shares and stop one (the teammate's channels close at once). The calls go to the
// machine inside its end-to-end channel (the relay refuses them in clear: a code holds a secret).
import { useEffect, useState } from 'preact/hooks';
import { del, get, post, q } from '../api';
import { errText } from '../store';
import { shareTime } from './ShareBanner';

interface ShareT {
  id: string;
  sessionId: string;
  user: string;
  mode: 'read' | 'answer';
  expiresAt?: string;
  revokedAt?: string;
  deviceName?: string;
}

const DURATIONS: [string, number][] = [['1 hour', 3600], ['8 hours', 8 * 3600], ['24 hours', 24 * 3600], ['7 days', 7 * 24 * 3600]];

/** Whether s still holds: not stopped, not past its end. */
const isLive = (s: ShareT) => !s.revokedAt && !(s.expiresAt && new Date(s.expiresAt).getTime() <= Date.now());

function stateOf(s: ShareT): string {
  if (s.revokedAt) return 'stopped';
  if (!isLive(s)) return 'ended';
  return s.deviceName ? `joined on ${s.deviceName}` : 'code not used yet';
}

export function SharePanel({ session }: { session: string }) {
  const [open, setOpen] = useState(false);
  const [shares, setShares] = useState<ShareT[] | undefined>();
  const [user, setUser] = useState('');
  const [mode, setMode] = useState<'read' | 'answer'>('read');
  const [secs, setSecs] = useState(24 * 3600);
  const [made, setMade] = useState<{ code: string; user: string; until: string } | undefined>();
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const base = `/sessions/${q(session)}/shares`;
  const load = () => get<ShareT[]>(base).then(setShares, (e) => setError(errText(e)));
  useEffect(() => {
    setMade(undefined);
    setShares(undefined);
    if (open) void load();
  }, [open, session]);

  const create = async (e: Event) => {
    e.preventDefault();
    if (busy || !user.trim()) return;
    setBusy(true);
    setError('');
    try {
      const r = await post<{ share: ShareT; code: string; codeExpiresAt?: string }>(base, { user: user.trim(), mode, expiresInSeconds: secs });
      setMade({ code: r.code, user: r.share.user, until: shareTime(r.codeExpiresAt) });
      await load();
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };
  const stop = async (id: string) => {
    setError('');
    try {
      await del(`/shares/${q(id)}`);
      await load();
    } catch (err) {
      setError(errText(err));
    }
  };

  const live = (shares ?? []).filter(isLive);
  return (
    <details class="share-panel" data-testid="share-panel" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        Share <span class="muted">{live.length ? `· ${live.length} active` : '· with a teammate'}</span>
      </summary>
      <form class="share-form" onSubmit={create} aria-label="Share this session with a teammate">
        <label for="share-user">Teammate's user on the relay</label>
        <input id="share-user" data-testid="share-user" value={user} required autocomplete="off" onInput={(e) => setUser((e.target as HTMLInputElement).value)} />
        <fieldset class="share-mode">
          <legend>They can</legend>
          <label><input type="radio" name="share-mode" data-testid="share-mode-read" checked={mode === 'read'} onChange={() => setMode('read')} /> watch only</label>
          <label><input type="radio" name="share-mode" data-testid="share-mode-answer" checked={mode === 'answer'} onChange={() => setMode('answer')} /> watch and answer prompts</label>
        </fieldset>
        <label for="share-until">For</label>
        <select id="share-until" data-testid="share-until" value={String(secs)} onChange={(e) => setSecs(Number((e.target as HTMLSelectElement).value))}>
          {DURATIONS.map(([l, s]) => <option key={s} value={String(s)}>{l}</option>)}
        </select>
        <button type="submit" class="btn primary" data-testid="share-create" disabled={busy || !user.trim()}>Make a share code</button>
      </form>
      {made && (
        <div class="share-made" data-testid="share-made">
          <p class="small">
            Send this code to <strong>{made.user}</strong>. It works once{made.until ? `, until ${made.until}` : ''}: they paste it on
            their Pair screen while logged in to the relay as {made.user}.
          </p>
          <textarea readOnly rows={3} data-testid="share-code" aria-label={`Share code for ${made.user}`} value={made.code} />
          <button type="button" class="btn" onClick={() => void navigator.clipboard?.writeText(made.code)}>Copy the code</button>
        </div>
      )}
      {error && <p class="error small" role="alert" data-testid="share-error">{error}</p>}
      {shares && shares.length > 0 && (
        <ul class="share-list" aria-label="Shares of this session">
          {shares.map((s) => (
            <li key={s.id} data-testid="share-item" data-share-id={s.id} data-state={stateOf(s)}>
              <span>
                <strong>{s.user}</strong> · {s.mode === 'answer' ? 'can answer' : 'watch only'} · {stateOf(s)}
                {s.expiresAt && !s.revokedAt ? ` · until ${shareTime(s.expiresAt)}` : ''}
              </span>
              {isLive(s) && (
                <button type="button" class="btn small-btn danger" data-testid="share-stop" aria-label={`Stop sharing with ${s.user}`} onClick={() => void stop(s.id)}>
                  Stop sharing
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </details>
  );
}
