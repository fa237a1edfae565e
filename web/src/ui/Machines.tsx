import { useEffect, useState } from 'preact/hooks';
import { errText, loadMachines, useAppState, useMachine } from '../store';
import { go, href } from '../router';
import { ago, ErrorBox, Spinner, TopBar } from './common';

export function Machines() {
  const s = useAppState();
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(true);
  const [busy, setBusy] = useState('');
  useEffect(() => {
    loadMachines()
      .catch((e) => setError(errText(e)))
      .finally(() => setLoading(false));
  }, []);
  const pick = async (id: string) => {
    setBusy(id);
    setError('');
    try {
      await useMachine(id, s.info?.role !== 'agent');
      go(href.sessions(id));
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy('');
    }
  };
  return (
    <>
      <TopBar title="Machines" back={s.machineId ? href.sessions(s.machineId) : undefined} />
      <main class="page" id="main">
        <ErrorBox error={error} />
        {loading && !s.machines.length && <Spinner label="Loading machines" />}
        {!loading && !s.machines.length && !error && <p class="muted">No machine yet: enroll one with betcode-agent enroll.</p>}
        <ul class="list" aria-label="Machines">
          {s.machines.map((m) => (
            <li key={m.id}>
              <button
                type="button"
                class={'row' + (m.id === s.machineId ? ' selected' : '')}
                data-testid="machine-item"
                aria-current={m.id === s.machineId ? 'true' : undefined}
                disabled={!!busy}
                onClick={() => pick(m.id)}
              >
                <span class={'dot ' + (m.online ? 'on' : 'off')} aria-hidden="true" />
                <span class="grow">
                  <span class="row-title">{m.name || m.id}</span>
                  <span class="muted small">
                    {m.online ? 'online' : `offline${m.lastSeen ? ' · seen ' + ago(m.lastSeen) : ''}`}
                    {m.owner ? ` · ${m.owner}` : ''}
                    {m.current ? ' · current' : ''}
                  </span>
                </span>
                {busy === m.id && <Spinner label="Switching" />}
              </button>
            </li>
          ))}
        </ul>
      </main>
    </>
  );
}
