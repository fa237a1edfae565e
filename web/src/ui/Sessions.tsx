import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get, post, q } from '../api';
import { deleteSession, errText, loadSessions, putSession, renameSession, sortedSessions, toast, useAppState } from '../store';
import { go, href } from '../router';
import { providerBadge } from '../providers';
import type { LocalSession, Session } from '../types';
import { ago, E2EBadge, ErrorBox, money, Spinner, StatusChip, TopBar } from './common';
import { InboxLink } from './Inbox';

export function Sessions({ machine }: { machine: string }) {
  const s = useAppState();
  const [error, setError] = useState('');
  const [needsPair, setNeedsPair] = useState(false);
  useEffect(() => {
    setNeedsPair(false);
    loadSessions().catch((e) => {
      // A machine on --relay-e2e=required (the default) serves a relay login nothing in clear.
      setNeedsPair(e instanceof ApiError && e.code === 'E2E_REQUIRED');
      setError(errText(e));
    });
  }, [machine]);
  const list = sortedSessions();
  const multi = s.info?.role !== 'agent';
  return (
    <>
      <TopBar title={s.machine?.name || 'Sessions'} back={multi ? href.machines() : undefined} backLabel="Machines">
        <InboxLink />
      </TopBar>
      <main class="page" id="main">
        <E2EBadge />
        <div class="toolbar">
          <a class="btn primary" href={href.newSession(machine)} data-testid="new-session">New session</a>
          <a class="btn" href={href.local(machine)}>Resume a terminal session</a>
        </div>
        {needsPair && !s.sessionsLoaded ? (
          <div class="card" role="alert" data-testid="needs-pair">
            <p>This machine talks to a browser only end to end, so the relay can neither read nor act.</p>
            <p>
              Run <code>betcode-agent pair</code> on the machine, then <a href={href.pair()}>pair this browser</a> (scan its QR code or paste its text).
            </p>
          </div>
        ) : (
          <ErrorBox error={s.sessionsLoaded ? '' : error} />
        )}
        {!s.sessionsLoaded && !error && <Spinner label="Loading sessions" />}
        {s.sessionsLoaded && !list.length && <p class="muted">No session yet.</p>}
        <ul class="list" aria-label="Sessions">
          {list.map((x) => (
            <li key={x.id} class="session-li">
              <a class="row" href={href.conv(machine, x.id)} data-testid="session-item">
                <span class="grow">
                  <span class="row-title">
                    {x.pendingPrompts > 0 && (
                      <span class="badge" title="Waiting for you">
                        {x.pendingPrompts}
                        <span class="sr-only"> waiting for you:</span>
                      </span>
                    )}
                    {x.name || firstLine(x.lastMessage) || x.cwd}
                    {providerBadge(x.provider) && <span class="chip provider" data-testid="provider-badge">{providerBadge(x.provider)}</span>}
                  </span>
                  <span class="muted small ellipsis">{x.lastMessage || x.cwd}</span>
                  <span class="muted small">
                    {shortPath(x.cwd)} · {money(x.costUsd)} · {ago(x.updatedAt)}
                  </span>
                </span>
                <StatusChip s={x} />
              </a>
              <SessionActions s={x} />
            </li>
          ))}
        </ul>
      </main>
    </>
  );
}

type Mode = '' | 'rename' | 'delete';

/**
 * Rename (an inline form: Enter saves, Escape cancels) and delete (an inline confirmation) of one
 * session of the list. The list itself follows session_updated / session_deleted.
 */
function SessionActions({ s }: { s: Session }) {
  const [mode, setMode] = useState<Mode>('');
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const input = useRef<HTMLInputElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  const label = s.name || firstLine(s.lastMessage) || s.cwd;
  const id = 'sess-' + s.id;
  useEffect(() => {
    if (mode === 'rename') input.current?.select();
  }, [mode]);
  const close = () => {
    setMode('');
    setError('');
    // Focus back on the button that opened the form.
    setTimeout(() => opener.current?.focus(), 0);
  };
  const run = async (f: () => Promise<void>) => {
    setBusy(true);
    setError('');
    try {
      await f();
      close();
    } catch (e) {
      setError(errText(e));
    } finally {
      setBusy(false);
    }
  };
  if (mode === 'rename') {
    return (
      <form
        class="session-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(() => renameSession(s.id, name));
        }}
        onKeyDown={(e) => e.key === 'Escape' && close()}
      >
        <label for={id + '-name'} class="sr-only">New name of {label}</label>
        <input id={id + '-name'} ref={input} value={name} maxLength={200} data-testid="session-name-input" placeholder="Session name" onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <button type="submit" class="btn primary small-btn" data-testid="session-rename-save" disabled={busy}>Save</button>
        <button type="button" class="btn small-btn" onClick={close}>Cancel</button>
        {error && <p class="error small" role="alert">{error}</p>}
      </form>
    );
  }
  if (mode === 'delete') {
    return (
      <div class="session-form" role="alertdialog" aria-labelledby={id + '-del'} onKeyDown={(e) => e.key === 'Escape' && close()}>
        <p id={id + '-del'} class="small">Delete “{label}” and its history? This cannot be undone.</p>
        <button
          type="button"
          class="btn danger small-btn"
          data-testid="session-delete-confirm"
          disabled={busy}
          ref={(b) => b?.focus()}
          onClick={() =>
            void run(async () => {
              await deleteSession(s.id);
              toast(`Deleted “${label}”`);
            })
          }
        >
          Delete
        </button>
        <button type="button" class="btn small-btn" onClick={close}>Cancel</button>
        {error && <p class="error small" role="alert">{error}</p>}
      </div>
    );
  }
  return (
    <div class="session-actions">
      <button
        type="button"
        class="icon-btn"
        ref={opener}
        data-testid="session-rename"
        aria-label={`Rename ${label}`}
        title="Rename"
        onClick={() => {
          setName(s.name || '');
          setMode('rename');
        }}
      >
        <svg viewBox="0 0 24 24" aria-hidden="true"><path d="M4 20h4L19 9l-4-4L4 16z M13 7l4 4" /></svg>
      </button>
      <button type="button" class="icon-btn" data-testid="session-delete" aria-label={`Delete ${label}`} title="Delete" onClick={() => setMode('delete')}>
        <svg viewBox="0 0 24 24" aria-hidden="true"><path d="M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3" /></svg>
      </button>
    </div>
  );
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
                <button type="button" class="btn" disabled={!!busy || l.adopted} onClick={() => adopt(id)}>
                  {l.adopted ? 'Adopted' : busy === id ? 'Adopting…' : 'Adopt'}
                  <span class="sr-only"> {l.firstPrompt || id}</span>
                </button>
              </li>
            );
          })}
        </ul>
      </main>
    </>
  );
}
