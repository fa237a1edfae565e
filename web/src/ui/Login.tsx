import { useState } from 'preact/hooks';
import { errText, login, state, useAppState } from '../store';
import { go } from '../router';
import { TopBar } from './common';

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
      go(state.machineId ? `#/m/${encodeURIComponent(state.machineId)}` : '#/machines');
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
        <p class="muted small server-info" aria-label="Server">
          {i ? `${i.role === 'relay' ? 'Relay' : 'Agent'} ${i.version}${i.push ? ' · push notifications' : ''}` : 'Contacting the server…'}
        </p>
      </main>
    </>
  );
}
