import { useEffect, useState } from 'preact/hooks';
import { del, get, post, q } from '../api';
import { idbGet, idbSet } from '../idb';
import { applyTheme, changed, deviceName, errText, logout, paired, state, toast, useAppState, type Theme } from '../store';
import { href } from '../router';
import type { PermissionRule, PushState, UsageReport } from '../types';
import { ago, ChanState, ErrorBox, money, Spinner, TopBar } from './common';
import { Specs } from './Specs';
import { VoiceSettings } from './VoiceSettings';

export function Settings() {
  const s = useAppState();
  return (
    <>
      <TopBar title="Settings" back={s.machineId ? href.sessions(s.machineId) : href.machines()} />
      <main class="page narrow stack-lg" id="main">
        <section class="card stack" aria-labelledby="acct-h">
          <h2 id="acct-h">Account</h2>
          <p>
            {s.token ? (s.me ? `${s.me.displayName || s.me.userId}` : '…') : `Not logged in to the relay: this device (${deviceName()}) uses its pairings`}
            {s.info && <span class="muted small"> · {s.info.role} {s.info.version}</span>}
          </p>
          {s.info?.role === 'relay' && (
            <p class="small">
              Machine: {s.machine?.name || s.machineId || 'none'}
              {paired(s.machineId) && <> (<ChanState />)</>} · <a href={href.machines()}>change</a>
            </p>
          )}
          {s.token ? (
            <button type="button" class="btn danger" onClick={() => logout()}>Log out</button>
          ) : (
            <a class="btn" href={href.login()}>Log in to the relay</a>
          )}
        </section>
        <section class="card stack" aria-labelledby="theme-h">
          <h2 id="theme-h">Theme</h2>
          <div class="seg" role="radiogroup" aria-labelledby="theme-h">
            {(['system', 'light', 'dark'] as Theme[]).map((t) => (
              <label key={t} class="option">
                <input type="radio" name="theme" checked={s.theme === t} onChange={() => applyTheme(t)} /> {t}
              </label>
            ))}
          </div>
        </section>
        <Push />
        <VoiceSettings />
        <Rules />
        <Specs />
        <UsageTotals />
      </main>
    </>
  );
}

function b64url(s: string): Uint8Array<ArrayBuffer> {
  const b = atob((s + '='.repeat((4 - (s.length % 4)) % 4)).replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(new ArrayBuffer(b.length));
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i);
  return out;
}

function Push() {
  const s = useAppState();
  const [ps, setPs] = useState<PushState | null>(null);
  const [on, setOn] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const supported = 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
  // A paired machine keeps this device's subscription itself (docs/e2ee-wire.md §4): it is given
  // inside the channel, and the relay's list (its login's subscriptions) is not this machine's.
  const e2e = !!paired(s.machineId);
  const subKey = e2e ? `pushSubscriptionId:${s.machineId}` : 'pushSubscriptionId';
  const load = async () => {
    if (e2e) {
      setPs({ enabled: true, vapidPublicKey: s.info?.vapidPublicKey || '', subscriptions: [] });
      return;
    }
    await get<PushState>('/push').then(setPs, (e) => setError(errText(e)));
  };
  useEffect(() => {
    if (!s.info?.push) return;
    load();
    if (supported)
      navigator.serviceWorker.getRegistration().then(async (r) => setOn(!!(await r?.pushManager.getSubscription())));
  }, [s.info?.push, e2e, s.machineId]);
  if (!s.info?.push) {
    return (
      <section class="card stack" aria-labelledby="push-h">
        <h2 id="push-h">Notifications</h2>
        <p class="muted">{s.info?.role === 'agent' ? 'Push notifications come through a relay.' : 'This server does not send push notifications.'}</p>
      </section>
    );
  }
  const toggle = async () => {
    setBusy(true);
    setError('');
    try {
      const reg = await navigator.serviceWorker.ready;
      const cur = await reg.pushManager.getSubscription();
      if (on) {
        const id = await idbGet<string>(subKey);
        if (id) await del(`/push/subscriptions/${q(id)}`).catch(() => {});
        await cur?.unsubscribe();
        setOn(false);
      } else {
        if ((await Notification.requestPermission()) !== 'granted') throw new Error('Notifications are blocked in this browser');
        const key = ps?.vapidPublicKey || s.info?.vapidPublicKey || '';
        const sub = cur || (await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64url(key) }));
        const name = e2e ? deviceName() : /Android|iPhone|iPad/.exec(navigator.userAgent)?.[0] || (navigator.platform || 'Browser');
        // Through the channel for a paired machine (api.ts routes it), else to the relay.
        const created = await post<{ id: string }>('/push/subscriptions', { ...sub.toJSON(), name });
        await idbSet(subKey, created?.id);
        setOn(true);
      }
      await load();
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy(false);
    }
  };
  const test = () => post('/push/test').then(() => { toast('Test notification sent'); setTimeout(load, 3000); }, (e) => setError(errText(e)));
  return (
    <section class="card stack" aria-labelledby="push-h">
      <h2 id="push-h">Notifications</h2>
      {!supported ? (
        <p class="muted">This browser cannot receive push notifications (on iPhone: add BetCode to the home screen first).</p>
      ) : (
        <label class="option">
          <input type="checkbox" role="switch" data-testid="push-toggle" checked={on} disabled={busy} onChange={toggle} />
          Notify this device when Claude waits for me or finishes
        </label>
      )}
      {e2e && <p class="muted small">Notifications of {s.machine?.name || s.machineId} are encrypted by the machine for this device; the relay only carries them.</p>}
      <ErrorBox error={error} />
      {ps && ps.subscriptions.length > 0 && (
        <ul class="list compact" aria-label="Subscribed devices">
          {ps.subscriptions.map((x) => (
            <li key={x.id} class="row static">
              <span class="grow">
                <span class="row-title">{x.name || x.endpointHost}</span>
                <span class="muted small block">
                  {x.endpointHost} · last: {x.lastStatus || 'nothing sent yet'}{x.lastAt ? ` ${ago(x.lastAt)}` : ''}
                  {x.lastError ? ` · ${x.lastError}` : ''}
                </span>
              </span>
              <button type="button" class="btn" aria-label={`Remove ${x.name || x.endpointHost}`} onClick={() => del(`/push/subscriptions/${q(x.id)}`).then(load, (e) => setError(errText(e)))}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      {!e2e && <button type="button" class="btn" onClick={test} disabled={!ps?.subscriptions.length}>Send a test notification</button>}
    </section>
  );
}

function Rules() {
  const s = useAppState();
  const [tool, setTool] = useState('');
  const [pattern, setPattern] = useState('');
  const [behavior, setBehavior] = useState<'allow' | 'deny'>('allow');
  const [error, setError] = useState('');
  useEffect(() => {
    get<PermissionRule[]>('/permission-rules').then((r) => { state.rules = r || []; changed(); }, (e) => setError(errText(e)));
  }, []);
  const add = async (e: Event) => {
    e.preventDefault();
    setError('');
    if (!tool.trim()) return setError('Name a tool, e.g. Bash');
    try {
      const r = await post<PermissionRule>('/permission-rules', { toolName: tool.trim(), pathPattern: pattern.trim() || undefined, behavior });
      if (!state.rules.some((x) => x.id === r.id)) state.rules = [...state.rules, r];
      changed();
      setTool('');
      setPattern('');
    } catch (err) {
      setError(errText(err));
    }
  };
  const remove = (id: string) =>
    del(`/permission-rules/${q(id)}`).then(() => { state.rules = state.rules.filter((r) => r.id !== id); changed(); setError(''); }, (e) => setError(errText(e)));
  return (
    <section class="card stack" aria-labelledby="rules-h">
      <h2 id="rules-h">Permission rules</h2>
      <p class="muted small">Answer Claude’s tool requests on this machine without asking. Deny wins over allow.</p>
      <ul class="list compact" aria-label="Permission rules">
        {s.rules.map((r) => (
          <li key={r.id} class="row static">
            <span class={'chip ' + (r.behavior === 'deny' ? 'st-error' : 'st-completed')}>{r.behavior}</span>
            <code class="grow wrap">{r.rule || r.toolName + (r.pathPattern ? `(${r.pathPattern})` : '')}</code>
            <span class="muted small">{r.source}</span>
            <button type="button" class="btn" aria-label={`Delete rule ${r.rule || r.toolName}`} onClick={() => remove(r.id)}>Delete</button>
          </li>
        ))}
        {!s.rules.length && <li class="muted small">No rule.</li>}
      </ul>
      <form class="rule-form" onSubmit={add}>
        <div class="stack">
          <label for="rule-tool">Tool</label>
          <input id="rule-tool" value={tool} placeholder="Bash" onInput={(e) => setTool((e.target as HTMLInputElement).value)} />
        </div>
        <div class="stack">
          <label for="rule-pattern">Pattern (optional)</label>
          <input id="rule-pattern" value={pattern} placeholder="go test *" onInput={(e) => setPattern((e.target as HTMLInputElement).value)} />
        </div>
        <div class="stack">
          <label for="rule-behavior">Behavior</label>
          <select id="rule-behavior" value={behavior} onChange={(e) => setBehavior((e.target as HTMLSelectElement).value as 'allow' | 'deny')}>
            <option value="allow">allow</option>
            <option value="deny">deny</option>
          </select>
        </div>
        <button type="submit" class="btn primary">Add rule</button>
      </form>
      <ErrorBox error={error} />
    </section>
  );
}

function UsageTotals() {
  const [u, setU] = useState<UsageReport | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    get<UsageReport>('/usage').then(setU, (e) => setError(errText(e)));
  }, []);
  return (
    <section class="card stack" aria-labelledby="usage-h">
      <h2 id="usage-h">Usage</h2>
      <ErrorBox error={error} />
      {!u && !error && <Spinner />}
      {u && (
        <table class="usage">
          <thead>
            <tr><th scope="col">Session</th><th scope="col">Input</th><th scope="col">Output</th><th scope="col">Cost</th></tr>
          </thead>
          <tbody>
            {u.sessions.slice(0, 50).map((x) => (
              <tr key={x.id}><td class="ellipsis">{x.name || x.id}</td><td>{x.inputTokens}</td><td>{x.outputTokens}</td><td>{money(x.costUsd)}</td></tr>
            ))}
          </tbody>
          <tfoot>
            <tr><th scope="row">Total</th><td>{u.total.inputTokens}</td><td>{u.total.outputTokens}</td><td>{money(u.total.costUsd)}</td></tr>
          </tfoot>
        </table>
      )}
    </section>
  );
}
