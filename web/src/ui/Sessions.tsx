import { useEffect, useState } from 'preact/hooks';
import { get, post, q } from '../api';
import { errText, loadSessions, putSession, sortedSessions, useAppState } from '../store';
import { go, href } from '../router';
import type { LocalSession, Session } from '../types';
import { ago, ErrorBox, money, Spinner, StatusChip, TopBar } from './common';

export function Sessions({ machine }: { machine: string }) {
  const s = useAppState();
  const [error, setError] = useState('');
  useEffect(() => {
    loadSessions().catch((e) => setError(errText(e)));
  }, [machine]);
  const list = sortedSessions();
  const multi = s.info?.role !== 'agent';
  return (
    <>
      <TopBar title={s.machine?.name || 'Sessions'} back={multi ? href.machines() : undefined} backLabel="Machines" />
      <main class="page" id="main">
        <div class="toolbar">
          <a class="btn primary" href={href.newSession(machine)} data-testid="new-session">New session</a>
          <a class="btn" href={href.local(machine)}>Resume a terminal session</a>
        </div>
        <ErrorBox error={s.sessionsLoaded ? '' : error} />
        {!s.sessionsLoaded && !error && <Spinner label="Loading sessions" />}
        {s.sessionsLoaded && !list.length && <p class="muted">No session yet.</p>}
        <ul class="list" aria-label="Sessions">
          {list.map((x) => (
            <li key={x.id}>
              <a class="row" href={href.conv(machine, x.id)} data-testid="session-item" aria-label={sessionLabel(x)}>
                <span class="grow">
                  <span class="row-title">
                    {x.pendingPrompts > 0 && (
                      <span class="badge" title="Waiting for you">{x.pendingPrompts}</span>
                    )}
                    {x.name || firstLine(x.lastMessage) || x.cwd}
                  </span>
                  <span class="muted small ellipsis">{x.lastMessage || x.cwd}</span>
                  <span class="muted small">
                    {shortPath(x.cwd)} · {money(x.costUsd)} · {ago(x.updatedAt)}
                  </span>
                </span>
                <StatusChip s={x} />
              </a>
            </li>
          ))}
        </ul>
      </main>
    </>
  );
}

function sessionLabel(x: Session) {
  const name = x.name || firstLine(x.lastMessage) || x.cwd;
  return `${name}, ${x.status}${x.pendingPrompts > 0 ? `, ${x.pendingPrompts} waiting for you` : ''}, ${money(x.costUsd)}`;
}
const firstLine = (t?: string) => (t || '').split('\n')[0].slice(0, 80);
export const shortPath = (p: string) => {
  const parts = (p || '').split('/').filter(Boolean);
  return parts.length > 2 ? '…/' + parts.slice(-2).join('/') : p;
};

export function LocalSessions({ machine }: { machine: string }) {
  const [list, setList] = useState<LocalSession[] | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState('');
  useEffect(() => {
    get<LocalSession[]>('/local-sessions')
      .then((l) => setList(l || []))
      .catch((e) => setError(errText(e)));
  }, [machine]);
  const adopt = async (id: string) => {
    setBusy(id);
    setError('');
    try {
      const sess = await post<Session>(`/local-sessions/${q(id)}/adopt`);
      putSession(sess);
      go(href.conv(machine, sess.id));
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy('');
    }
  };
  return (
    <>
      <TopBar title="Terminal sessions" back={href.sessions(machine)} backLabel="Sessions" />
      <main class="page" id="main">
        <p class="muted">Claude Code sessions started in a terminal on this machine. Adopt one to continue it here.</p>
        <ErrorBox error={error} />
        {!list && !error && <Spinner />}
        {list && !list.length && <p class="muted">None found.</p>}
        <ul class="list" aria-label="Terminal sessions">
          {(list || []).map((l) => {
            const id = l.sessionId || l.id || '';
            return (
              <li key={id} class="row static">
                <span class="grow">
                  <span class="row-title ellipsis">{l.firstPrompt || id}</span>
                  {l.lastMessagePreview && <span class="muted small ellipsis">{l.lastMessagePreview}</span>}
                  <span class="muted small">
                    {shortPath(l.workingDirectory || l.cwd || '')} · {l.messageCount ?? 0} messages · {ago(l.updatedAt)}
                  </span>
                </span>
                <button type="button" class="btn" disabled={!!busy || l.adopted} onClick={() => adopt(id)} aria-label={`Adopt ${l.firstPrompt || id}`}>
                  {l.adopted ? 'Adopted' : busy === id ? 'Adopting…' : 'Adopt'}
                </button>
              </li>
            );
          })}
        </ul>
      </main>
    </>
  );
}
