import { useEffect, useRef, useState } from 'preact/hooks';
import { errText, login, state, useAppState } from '../store';
import { go } from '../router';
import { pollSSO, startSSO, type DeviceStart } from '../sso';
import { TopBar } from './common';

const home = () => go(state.machineId ? `#/m/${encodeURIComponent(state.machineId)}` : '#/machines');

/** Why a single sign-on failed, in words. */
function ssoError(err: unknown): string {
  const e = err as { status?: number };
  if (e.status === 403) return 'The sign-in was denied at your identity provider';
  if (e.status === 410) return 'The code expired before the sign-in finished: start again';
  if (e.status === 401) return 'The relay refused the sign-in';
  return errText(err);
}

/** Single sign-on: the relay's device flow, shown as a code to enter at the identity provider. */
function SingleSignOn() {
  const [flow, setFlow] = useState<DeviceStart | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);
  const start = async () => {
    abort.current?.abort();
    const ac = new AbortController();
    abort.current = ac;
    setBusy(true);
    setError('');
    try {
      const d = await startSSO(ac.signal);
      setFlow(d);
      const token = await pollSSO(d, ac.signal);
      await login(token);
      home();
    } catch (err) {
      if (!ac.signal.aborted) setError(ssoError(err));
    } finally {
      if (abort.current === ac) {
        abort.current = null;
        setFlow(null);
        setBusy(false);
      }
    }
  };
  const cancel = () => {
    abort.current?.abort();
    abort.current = null;
    setFlow(null);
    setBusy(false);
  };
  return (
    <section class="card stack" aria-labelledby="sso-title">
      <h2 id="sso-title">Single sign-on</h2>
      {flow ? (
        <div class="stack" role="status" aria-live="polite" data-testid="login-oidc-flow">
          <p>Enter this code at your identity provider:</p>
          <output class="sso-code" data-testid="login-oidc-code" aria-label={`Code ${flow.userCode}`}>
            {flow.userCode}
          </output>
          <a
            class="btn primary"
            href={flow.verificationUriComplete || flow.verificationUri}
            target="_blank"
            rel="noopener noreferrer"
            data-testid="login-oidc-link"
          >
            Open the sign-in page (new tab)
          </a>
          <p class="muted small">Waiting for you to approve the sign-in…</p>
          <button type="button" class="btn" data-testid="login-oidc-cancel" onClick={cancel}>
            Cancel
          </button>
        </div>
      ) : (
        <button type="button" class="btn" data-testid="login-oidc" disabled={busy} onClick={() => void start()}>
          {busy ? 'Starting…' : 'Sign in with single sign-on'}
        </button>
      )}
      {error && <p class="error" role="alert" data-testid="login-oidc-error">{error}</p>}
    </section>
  );
}

export function Login() {
  const s = useAppState();
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!token.trim()) {
      setError('Paste a token');
      return;
    }
    setBusy(true);
    setError('');
    try {
      await login(token.trim());
      setToken('');
      home();
    } catch (err) {
      setError((err as { status?: number }).status === 401 ? 'This token was refused' : errText(err));
    } finally {
      setBusy(false);
    }
  };
  const i = s.info;
  return (
    <>
      <TopBar title="BetCode" />
      <main class="page narrow" id="main">
        <form class="card stack" onSubmit={submit} aria-describedby="login-help">
          <h2>Log in</h2>
          <p id="login-help" class="muted">
            {i?.role === 'agent'
              ? 'Paste the agent’s local token (betcode-agent prints where it is stored).'
              : 'Paste a client token (bct_…) from your relay administrator.'}
          </p>
          <label for="token">Token</label>
          <input
            id="token"
            type="password"
            autocomplete="current-password"
            spellcheck={false}
            autocapitalize="off"
            data-testid="login-token"
            value={token}
            onInput={(e) => setToken((e.target as HTMLInputElement).value)}
            aria-invalid={!!error}
            aria-describedby={error ? 'login-error' : undefined}
          />
          {error && <p id="login-error" class="error" role="alert">{error}</p>}
          <button type="submit" class="btn primary" data-testid="login-submit" disabled={busy}>
            {busy ? 'Checking…' : 'Log in'}
          </button>
        </form>
        {i?.oidc && <SingleSignOn />}
        {i?.role === 'relay' && (
          <p class="small">
            Reach a machine end to end, with no relay login: <a href="#/pair" data-testid="login-pair">pair a machine</a>.
          </p>
        )}
        <p class="muted small server-info">
          {i ? `${i.role === 'relay' ? 'Relay' : 'Agent'} ${i.version}${i.push ? ' · push notifications' : ''}` : 'Contacting the server…'}
        </p>
      </main>
    </>
  );
}
