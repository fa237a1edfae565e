import { useEffect, useState } from 'preact/hooks';
import { errText, forgetPairing, loadMachines, paired, useAppState, useMachine } from '../store';
import { go, href } from '../router';
import type { Pairing } from '../e2ee';
import { ago, ChanState, ErrorBox, Spinner, TopBar } from './common';

export function Machines() {
  const s = useAppState();
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(!!s.token);
  const [busy, setBusy] = useState('');
  useEffect(() => {
    if (!s.token) return;
    loadMachines()
      .catch((e) => setError(errText(e)))
      .finally(() => setLoading(false));
  }, [s.token]);
  const pick = async (id: string) => {
    setBusy(id);
    setError('');
    try {
      await useMachine(id, s.info?.role !== 'agent' && !paired(id));
      go(href.sessions(id));
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy('');
    }
  };
  const relay = s.info?.role !== 'agent';
  const pairs = relay ? s.pairings : [];
  // A machine both paired and listed by the relay shows once, as paired: calls to it go end to end.
  const others = s.machines.filter((m) => !paired(m.id));
  return (
    <>
      <TopBar title="Machines" back={s.machineId ? href.sessions(s.machineId) : undefined} />
      <main class="page" id="main">
        <ErrorBox error={error} />
        {relay && (
          <section class="stack" aria-labelledby="paired-h">
            <h2 id="paired-h">Paired with this device</h2>
            {!pairs.length && <p class="muted">No machine yet: pair one to reach it end to end.</p>}
            <ul class="list" aria-labelledby="paired-h">
              {pairs.map((p) => (
                <PairedMachine key={p.machineId} p={p} current={p.machineId === s.machineId} busy={busy} onPick={pick} onError={setError} />
              ))}
            </ul>
            <div class="toolbar">
              <a class="btn primary" href={href.pair()} data-testid="pair-machine">Pair a machine</a>
            </div>
          </section>
        )}
        {(s.token || !relay) && (
          <section class="stack" aria-labelledby="relay-h">
            {relay && <h2 id="relay-h">Through the relay login</h2>}
            {loading && !s.machines.length && <Spinner label="Loading machines" />}
            {!loading && !others.length && !error && (
              <p class="muted">{relay && pairs.length ? 'No other machine.' : 'No machine yet: enroll one with betcode-agent enroll.'}</p>
            )}
            <ul class="list" aria-label="Machines">
              {others.map((m) => (
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
          </section>
        )}
        {relay && !s.token && (
          <p class="muted small">
            Machines that run <code>--relay-e2e=optional</code> are also reachable by <a href={href.login()}>logging in to the relay</a>.
          </p>
        )}
      </main>
    </>
  );
}

/** A paired machine: its name, its key's fingerprint, when; pick it, or forget it on this device. */
function PairedMachine(p: { p: Pairing; current: boolean; busy: string; onPick: (id: string) => void; onError: (e: string) => void }) {
  const [confirm, setConfirm] = useState(false);
  const m = p.p;
  const name = m.machineName || m.machineId;
  return (
    <li class="stack paired" data-testid="paired-machine">
      <button
        type="button"
        class={'row' + (p.current ? ' selected' : '')}
        data-testid="machine-item"
        aria-current={p.current ? 'true' : undefined}
        disabled={!!p.busy}
        onClick={() => p.onPick(m.machineId)}
      >
        <span class="lock" aria-hidden="true">🔒</span>
        <span class="grow">
          <span class="row-title">{name}</span>
          <span class="muted small">end-to-end encrypted · paired {ago(m.pairedAt)}{p.current ? ' · current' : ''}</span>
        </span>
        {p.busy === m.machineId && <Spinner label="Switching" />}
      </button>
      <details class="machine-details">
        <summary>Details of {name}</summary>
        <dl class="small">
          <dt>Machine</dt>
          <dd><code>{m.machineId}</code></dd>
          <dt>Machine key fingerprint</dt>
          <dd><code class="wrap" data-testid="machine-fingerprint">{m.fingerprint}</code></dd>
          <dt>Paired</dt>
          <dd>{new Date(m.pairedAt).toLocaleString()}</dd>
          {p.current && (
            <>
              <dt>Channel</dt>
              <dd><ChanState /></dd>
            </>
          )}
        </dl>
        <p class="muted small">Check that the fingerprint is the one <code>betcode-agent devices list</code> prints on the machine.</p>
        {confirm ? (
          <div class="toolbar" role="group" aria-label={`Forget ${name}?`}>
            <button type="button" class="btn danger" data-testid="forget-confirm"
              onClick={() => forgetPairing(m.machineId).catch((e) => p.onError(errText(e)))}>
              Forget {name}
            </button>
            <button type="button" class="btn" onClick={() => setConfirm(false)}>Cancel</button>
          </div>
        ) : (
          <button type="button" class="btn" data-testid="forget-machine" onClick={() => setConfirm(true)}>
            Forget on this device
          </button>
        )}
      </details>
    </li>
  );
}
