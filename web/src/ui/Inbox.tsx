import { memo } from 'preact/compat';
import { useState } from 'preact/hooks';
import { answerPermissionIn, answerQuestionIn, feeds, inboxHome, inboxItems, machineName, markSeen, type InboxItem } from '../inbox';
import { buildAnswers, optionValue } from '../questions';
import { href } from '../router';
import { errText, useAppState } from '../store';
import { ago, TopBar } from './common';

/** How many items render at first; "Show more" adds as many (a long inbox stays fast). */
const PAGE = 20;

/** The home once more than one machine is paired: what waits on the user on every machine. */
export function Inbox() {
  const s = useAppState();
  const [shown, setShown] = useState(PAGE);
  const items = inboxItems();
  const down = [...feeds.values()].filter((f) => f.conn !== 'open' && !f.stopped);
  return (
    <>
      <TopBar title="Inbox">
        <a class="btn" href={href.machines()} data-testid="inbox-machines">Machines</a>
      </TopBar>
      <main class="page" id="main" data-testid="inbox">
        <p class="muted small" data-testid="inbox-count" role="status" aria-live="polite">
          {items.length ? `${items.length} waiting on ${s.pairings.length} machines` : `Nothing waiting on ${s.pairings.length} machines`}
        </p>
        {down.length > 0 && (
          <p class="muted small" data-testid="inbox-down">
            Not connected yet: {down.map((f) => machineName(f.machineId)).join(', ')}
          </p>
        )}
        <ul class="list" aria-label="Waiting on you">
          {items.slice(0, shown).map((it) => (
            <Row key={it.id} it={it} />
          ))}
        </ul>
        {items.length > shown && (
          <button type="button" class="btn" data-testid="inbox-more" onClick={() => setShown(shown + PAGE)}>
            Show {Math.min(PAGE, items.length - shown)} more of {items.length - shown}
          </button>
        )}
      </main>
    </>
  );
}

/** A link to the inbox with its count, on screens of one machine once more than one is paired. */
export function InboxLink() {
  useAppState();
  if (!inboxHome()) return null;
  const n = inboxItems().length;
  return (
    <a class="btn" href={href.inbox()} data-testid="to-inbox" aria-label={n ? `Inbox, ${n} waiting` : 'Inbox'}>
      Inbox{n ? ` (${n})` : ''}
    </a>
  );
}

const KIND: Record<InboxItem['kind'], string> = {
  permission: 'Permission', question: 'Question', error: 'Turn failed', done: 'Turn finished',
};

/** One waiting item; re-renders only when its session changed. */
const Row = memo(
  function Row({ it }: { it: InboxItem }) {
    const sname = it.session.name || it.session.lastMessage?.slice(0, 60) || it.session.id;
    const hid = 'inbox-' + it.id.replace(/[^a-zA-Z0-9_-]/g, '_');
    return (
      <li class="card prompt open stack" data-testid="inbox-item" data-kind={it.kind} data-machine={it.machineId} data-session={it.session.id}
        data-prompt={it.promptId || ''} aria-labelledby={hid}>
        <h2 id={hid} class="prompt-title">
          {KIND[it.kind]}{it.toolName ? `: ${it.toolName}` : ''} · <span data-testid="inbox-machine">{it.machineName}</span>
        </h2>
        <p class="small muted">
          <a href={href.conv(it.machineId, it.session.id)} data-testid="inbox-open">{sname}</a>
          {it.at ? ` · ${ago(it.at)}` : ''}
        </p>
        {it.kind === 'permission' && <PermissionBody it={it} />}
        {it.kind === 'question' && <QuestionBody it={it} />}
        {(it.kind === 'error' || it.kind === 'done') && (
          <>
            {it.session.lastMessage && <p class="small clamp">{it.session.lastMessage}</p>}
            <div class="toolbar">
              <button type="button" class="btn" data-testid="inbox-seen" onClick={() => markSeen(it.machineId, it.session.id, it.session.updatedAt)}>
                Mark seen
              </button>
            </div>
          </>
        )}
      </li>
    );
  },
  // Every change of a session is a new Session object (the store's putSession, a watcher's update).
  (a, b) => a.it.id === b.it.id && a.it.at === b.it.at && a.it.session === b.it.session && a.it.machineName === b.it.machineName,
);

function summary(input: Record<string, unknown> | undefined): string {
  if (!input) return '';
  const v = input.command ?? input.file_path ?? input.path ?? input.url;
  return typeof v === 'string' ? v : '';
}

function PermissionBody({ it }: { it: InboxItem }) {
  const [busy, setBusy] = useState('');
  const [err, setErr] = useState('');
  const act = (b: 'allow' | 'allowSession' | 'deny') => {
    setBusy(b);
    setErr('');
    answerPermissionIn(it, b).catch((e) => {
      setErr(errText(e));
      setBusy('');
    });
  };
  const what = summary(it.input);
  return (
    <>
      {it.description && <p class="small">{it.description}</p>}
      {what && <pre class="small wrap"><code>{what}</code></pre>}
      <div class="toolbar">
        <button type="button" class="btn primary" data-testid="inbox-allow" disabled={!!busy} onClick={() => act('allow')}>Allow once</button>
        <button type="button" class="btn" data-testid="inbox-allow-session" disabled={!!busy} onClick={() => act('allowSession')}>Allow for session</button>
        <button type="button" class="btn danger" data-testid="inbox-deny" disabled={!!busy} onClick={() => act('deny')}>Deny</button>
      </div>
      {busy && <p class="muted small" role="status">Sending…</p>}
      {err && <p class="error small" role="alert">{err}</p>}
    </>
  );
}

function QuestionBody({ it }: { it: InboxItem }) {
  const [chosen, setChosen] = useState<string[][]>([]);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  const qs = it.questions || [];
  const answers = buildAnswers(qs, chosen);
  const base = 'iq-' + it.id.replace(/[^a-zA-Z0-9_-]/g, '_');
  const submit = (e: Event) => {
    e.preventDefault();
    if (!answers || busy) return;
    setBusy(true);
    setErr('');
    answerQuestionIn(it, answers).catch((e2) => {
      setErr(errText(e2));
      setBusy(false);
    });
  };
  const pick = (qi: number, v: string, multi: boolean) => {
    const next = chosen.slice();
    const cur = next[qi] || [];
    next[qi] = multi ? (cur.includes(v) ? cur.filter((x) => x !== v) : [...cur, v]) : [v];
    setChosen(next);
  };
  return (
    <form class="stack" onSubmit={submit} aria-label={`Answer ${qs.length > 1 ? qs.length + ' questions' : 'the question'}`}>
      {qs.map((a, qi) => (
        <fieldset key={qi} disabled={busy} class="ask">
          <legend class="small">{a.question}</legend>
          <div class="options">
            {a.options.map((o, i) => {
              const v = optionValue(o);
              return (
                <label key={i} class="option">
                  <input type={a.multiSelect ? 'checkbox' : 'radio'} name={`${base}-${qi}`} value={v}
                    checked={(chosen[qi] || []).includes(v)} onChange={() => pick(qi, v, a.multiSelect)} />
                  <span>{o.label || o.value}</span>
                </label>
              );
            })}
          </div>
        </fieldset>
      ))}
      <div class="toolbar">
        <button type="submit" class="btn primary" data-testid="inbox-answer" disabled={!answers || busy}>{busy ? 'Sending…' : 'Answer'}</button>
      </div>
      {err && <p class="error small" role="alert">{err}</p>}
    </form>
  );
}
