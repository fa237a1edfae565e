import { Component } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { get, q } from '../api';
import { editsOf, type DiffLine } from '../diff';
import { esc } from '../esc';
import { renderMarkdown } from '../markdown';
import {
  answerPermission, answerQuestion, cancelTurn, catchUpRest, conv, errText, isBusy, isOpen, putSession, saveConvs,
  sendMessage, state, subscribe, toast, unsubscribe, useAppState, type Conv, type Item, type PermItem,
  type QuestionItem, type TextItem, type ToolItem,
} from '../store';
import { href } from '../router';
import type { FileAttachment, Session, Task } from '../types';
import { Attachments, money, readImages, Spinner, StatusChip, TopBar } from './common';
import { shortPath } from './Sessions';

export function Conversation({ machine, session }: { machine: string; session: string }) {
  const s = useAppState();
  const c = conv(session);
  const sess = s.sessions.get(session);
  const logRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  useEffect(() => {
    subscribe(session);
    get<Session>(`/sessions/${q(session)}`).then(putSession, (e) => toast(errText(e)));
    // No socket after 3 s: show the history over REST meanwhile.
    const t = setTimeout(() => {
      if (state.conn !== 'open') catchUpRest(session).catch(() => {});
    }, 3000);
    return () => {
      clearTimeout(t);
      unsubscribe(session);
      saveConvs();
    };
  }, [session]);

  // Keep the newest output in view unless the user scrolled up to read.
  useLayoutEffect(() => {
    const el = logRef.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  const onScroll = () => {
    const el = logRef.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  const title = sess?.name || sess?.lastMessage?.split('\n')[0].slice(0, 60) || 'Session';
  const busy = isBusy(session);
  return (
    <div class="conv-page">
      <TopBar title={title} back={href.sessions(machine)} backLabel="Sessions">
        <a class="btn small-btn" href={href.changes(machine, session)} data-testid="changes-tab">Changes</a>
      </TopBar>
      <main id="main" class="conv-main">
        <div class="conv-status small muted" aria-label="Session status">
          {sess && <StatusChip s={{ status: sess.status, agentStatus: (c.agentStatus as Session['agentStatus']) || sess.agentStatus }} />}
          {sess && <span title={sess.cwd}>{shortPath(sess.cwd)}</span>}
          {(c.model || sess?.model) && <span>{c.model || sess?.model}</span>}
          {sess && <span>{money(sess.costUsd)}</span>}
          {sess && <span>{fmt(sess.inputTokens)} in / {fmt(sess.outputTokens)} out</span>}
          {typeof c.contextPct === 'number' && <span>context {Math.round(c.contextPct)}%</span>}
          {c.planMode && <span class="chip">plan mode</span>}
        </div>
        <div
          class="log"
          ref={logRef}
          onScroll={onScroll}
          data-testid="conversation"
          role="log"
          aria-live="polite"
          aria-relevant="additions text"
          aria-label="Conversation"
          tabIndex={0}
        >
          {!c.items.length && !c.replayed && <Spinner label="Loading the conversation" />}
          {c.items.map((it) => (
            <ItemView key={it.key} it={it} v={it.v} c={c} open={promptOpen(c, it)} />
          ))}
          {c.ended && (
            <p class="note error" role="alert">
              {c.ended}{' '}
              <button type="button" class="btn" onClick={() => subscribe(session)}>Resubscribe</button>
            </p>
          )}
          {busy && c.agentStatus && c.agentStatus !== 'idle' && (
            <p class="note working"><Spinner label={c.agentStatus} /> {c.statusMessage || c.agentStatus.replace(/_/g, ' ')}</p>
          )}
        </div>
        {c.tasks.length > 0 && <Todos tasks={c.tasks} />}
        <Composer session={session} busy={busy} />
      </main>
    </div>
  );
}

const fmt = (n: number) => (n >= 1e6 ? (n / 1e6).toFixed(1) + 'M' : n >= 1e3 ? (n / 1e3).toFixed(1) + 'k' : String(n || 0));

function promptOpen(c: Conv, it: Item): boolean {
  if (it.k === 'perm') return isOpen(c, it.requestId, it.live);
  if (it.k === 'question') return isOpen(c, it.questionId, it.live);
  return false;
}

interface ItemProps { it: Item; v: number; c: Conv; open: boolean }

/** One conversation item; re-renders only when the item itself (or its open state) changed. */
class ItemView extends Component<ItemProps> {
  shouldComponentUpdate(n: ItemProps) {
    return n.it !== this.props.it || n.v !== this.props.v || n.open !== this.props.open;
  }
  render({ it, c, open }: ItemProps) {
    switch (it.k) {
      case 'text':
        // Long texts stay in blocks when done too: one giant block is slow to lay out.
        return it.done && it.text.length < 8192 ? <MarkdownBlock text={it.text} streaming={false} /> : <StreamingMarkdown item={it} />;
      case 'user':
        return <div class="user-msg" aria-label="You">{it.text}</div>;
      case 'tool':
        return <ToolCard it={it} />;
      case 'perm':
        return <Permission it={it} c={c} open={open} />;
      case 'question':
        return <Question it={it} c={c} open={open} />;
      case 'note':
        if (it.kind === 'plan') return <div class="plan card"><strong>Plan</strong><MarkdownBlock text={it.text} streaming={false} /></div>;
        return <p class={'note ' + it.kind} role={it.kind === 'error' ? 'alert' : undefined}>{it.text}</p>;
    }
  }
}

function MarkdownBlock({ text, streaming }: { text: string; streaming: boolean }) {
  return (
    <div
      class="md assistant"
      data-testid="assistant-text"
      // renderMarkdown escapes all HTML of the source and filters link targets.
      dangerouslySetInnerHTML={{ __html: renderMarkdown(text) }}
      aria-busy={streaming}
    />
  );
}

/**
 * Streaming text, rendered incrementally: the text up to its last blank line outside a code
 * fence is cut into blocks rendered once each; only the tail is parsed again on each frame, so a
 * long answer costs O(new text) per frame, not O(all text). The finished text is rendered whole.
 */
interface MdCache { pos: number; scan: number; fence: boolean; chunks: string[] }
const mdCaches = new WeakMap<object, MdCache>();

function advance(c: MdCache, text: string) {
  let i = c.scan;
  for (;;) {
    const nl = text.indexOf('\n', i);
    if (nl < 0) break;
    const line = text.slice(i, nl);
    if (/^ {0,3}(```|~~~)/.test(line)) c.fence = !c.fence;
    // A block ends at a blank line; a long one (4 KB) at any line end, so that layout, which
    // grows with the size of the block being changed, stays small.
    else if (!c.fence && (!line.trim() || nl + 1 - c.pos > 4096)) cut(c, text, nl + 1);
    i = nl + 1;
  }
  c.scan = i;
  // One giant line: cut at a space.
  if (!c.fence && text.length - c.pos > 8192) {
    const sp = text.lastIndexOf(' ', text.length - 1);
    if (sp > c.pos) {
      cut(c, text, sp + 1);
      c.scan = Math.max(c.scan, c.pos);
    }
  }
}

function cut(c: MdCache, text: string, at: number) {
  const chunk = text.slice(c.pos, at);
  if (chunk.trim()) c.chunks.push(renderMarkdown(chunk));
  c.pos = at;
}

function StreamingMarkdown({ item }: { item: TextItem }) {
  let c = mdCaches.get(item);
  if (!c || c.pos > item.text.length) mdCaches.set(item, (c = { pos: 0, scan: 0, fence: false, chunks: [] }));
  advance(c, item.text);
  const tail = item.text.slice(c.pos);
  // A huge code block being written shows as plain text until it is complete.
  const tailHtml = tail.length > 16000 && !item.done ? `<p class="pre">${esc(tail)}</p>` : renderMarkdown(tail);
  return (
    <div class={'md assistant' + (item.done ? '' : ' streaming')} data-testid="assistant-text" aria-busy={!item.done}>
      {c.chunks.map((h, i) => (
        <div key={i} class="md-chunk" dangerouslySetInnerHTML={{ __html: h }} />
      ))}
      <div class="md-chunk" dangerouslySetInnerHTML={{ __html: tailHtml }} />
    </div>
  );
}

export function DiffView({ lines, label }: { lines: DiffLine[]; label: string }) {
  return (
    <pre class="diff" aria-label={label}>
      {lines.map((l, i) => (
        <span key={i} class={l.t === '+' ? 'd-add' : l.t === '-' ? 'd-del' : l.t === '@' ? 'd-hunk' : 'd-ctx'}>
          <span class="d-sign" aria-hidden="true">{l.t === '@' ? ' ' : l.t}</span>
          {l.t === '+' ? <span class="sr-only">added: </span> : l.t === '-' ? <span class="sr-only">removed: </span> : null}
          {l.s}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

function summary(toolName: string, input: Record<string, unknown>, description: string): string {
  const v = input.command ?? input.file_path ?? input.path ?? input.pattern ?? input.url ?? input.query ?? input.notebook_path;
  const s = typeof v === 'string' ? v : description;
  return (s || toolName).split('\n')[0].slice(0, 160);
}

function InputView({ toolName, input }: { toolName: string; input: Record<string, unknown> }) {
  const e = editsOf(toolName, input);
  if (e) return <>{e.path && <code class="path">{e.path}</code>}<DiffView lines={e.lines} label={`Changes to ${e.path || 'the file'}`} /></>;
  if (typeof input.command === 'string') return <pre class="code cmd">{input.command}</pre>;
  const keys = Object.keys(input);
  if (!keys.length) return null;
  return <pre class="code">{JSON.stringify(input, null, 2)}</pre>;
}

const OUT_MAX = 20000;

function ToolCard({ it }: { it: ToolItem }) {
  const [all, setAll] = useState(false);
  const out = it.output ?? '';
  const state = !it.done ? 'running' : it.isError ? 'failed' : 'done';
  return (
    <details class={'tool card st-' + state} data-testid="tool-card">
      <summary aria-label={`${it.toolName}: ${summary(it.toolName, it.input, it.description)}, ${state}`}>
        <span class="tool-name">{it.toolName}</span>
        <span class="grow ellipsis tool-sum">{summary(it.toolName, it.input, it.description)}</span>
        <span class={'tool-state ' + state} aria-hidden="true">
          {state === 'running' ? '…' : state === 'failed' ? '✗' : '✓'}
          {typeof it.durationMs === 'number' && it.done ? ` ${(it.durationMs / 1000).toFixed(1)}s` : ''}
        </span>
      </summary>
      <div class="tool-body">
        {it.description && <p class="muted small">{it.description}</p>}
        <InputView toolName={it.toolName} input={it.input} />
        {it.done && (
          <>
            <div class="small muted">{it.isError ? 'Error' : 'Result'}</div>
            <pre class={'code out' + (it.isError ? ' err' : '')}>{all || out.length <= OUT_MAX ? out : out.slice(0, OUT_MAX)}</pre>
            {!all && out.length > OUT_MAX && (
              <button type="button" class="btn" onClick={() => setAll(true)}>Show all ({Math.round(out.length / 1024)} KB)</button>
            )}
          </>
        )}
      </div>
    </details>
  );
}

const ANSWER_TEXT: Record<string, string> = { allow: 'Allowed once', allowSession: 'Allowed for this session', deny: 'Denied' };

function Permission({ it, c, open }: { it: PermItem; c: Conv; open: boolean }) {
  const [reason, setReason] = useState('');
  const answered = c.answered.get(it.requestId);
  const id = 'perm-' + it.requestId;
  return (
    <section class={'card prompt' + (open ? ' open' : '')} data-testid="permission-prompt" aria-labelledby={id + '-h'}>
      <h3 id={id + '-h'} class="prompt-title">
        <span class="tool-name">{it.toolName}</span> wants permission
      </h3>
      {it.description && <p>{it.description}</p>}
      <InputView toolName={it.toolName} input={it.input} />
      {open ? (
        <>
          <div class="toolbar">
            <button type="button" class="btn primary" data-testid="allow-once" onClick={() => answerPermission(c.sessionId, it.requestId, 'allow')}>
              Allow once
            </button>
            <button type="button" class="btn" data-testid="allow-session" onClick={() => answerPermission(c.sessionId, it.requestId, 'allowSession')}>
              Allow for session
            </button>
            <button type="button" class="btn danger" data-testid="deny" onClick={() => answerPermission(c.sessionId, it.requestId, 'deny', reason.trim())}>
              Deny
            </button>
          </div>
          <label for={id + '-reason'} class="small">Deny reason (optional)</label>
          <input id={id + '-reason'} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} placeholder="Tell Claude why" />
        </>
      ) : (
        <p class="muted small" role="status">{answered ? ANSWER_TEXT[answered] || answered : 'No longer waiting (answered, timed out or cancelled)'}</p>
      )}
    </section>
  );
}

function Question({ it, c, open }: { it: QuestionItem; c: Conv; open: boolean }) {
  const [sel, setSel] = useState<string[]>([]);
  const answered = c.answered.get(it.questionId);
  const name = 'q-' + it.questionId;
  const submit = (e: Event) => {
    e.preventDefault();
    if (!sel.length) return;
    answerQuestion(c.sessionId, it.questionId, it.question, sel.join(', '));
  };
  const toggle = (v: string) => setSel(it.multiSelect ? (sel.includes(v) ? sel.filter((x) => x !== v) : [...sel, v]) : [v]);
  return (
    <form class={'card prompt' + (open ? ' open' : '')} data-testid="question" onSubmit={submit}>
      <fieldset disabled={!open}>
        <legend class="prompt-title">{it.question}</legend>
        {it.multiSelect && <p class="muted small">Choose any number.</p>}
        <div class="options">
          {it.options.map((o, i) => {
            const v = o.label || o.value;
            return (
              <label key={i} class="option" data-testid="question-option">
                <input type={it.multiSelect ? 'checkbox' : 'radio'} name={name} value={v} checked={sel.includes(v)} onChange={() => toggle(v)} />
                <span>
                  <span class="opt-label">{o.label || o.value}</span>
                  {o.description && <span class="muted small block">{o.description}</span>}
                </span>
              </label>
            );
          })}
        </div>
        {open ? (
          <button type="submit" class="btn primary" data-testid="question-submit" disabled={!sel.length}>Answer</button>
        ) : (
          <p class="muted small" role="status">{answered ? `Answered: ${answered}` : 'No longer waiting'}</p>
        )}
      </fieldset>
    </form>
  );
}

function Todos({ tasks }: { tasks: Task[] }) {
  const done = tasks.filter((t) => t.status === 'completed').length;
  const now = tasks.find((t) => t.status === 'in_progress');
  return (
    <details class="todos" data-testid="todo-list">
      <summary>
        Tasks {done}/{tasks.length}
        {now && <span class="muted"> · {now.activeForm || now.subject}</span>}
      </summary>
      <ul aria-label="Tasks">
        {tasks.map((t) => (
          <li key={t.id} class={'todo ' + t.status}>
            <span aria-hidden="true">{t.status === 'completed' ? '☑' : t.status === 'in_progress' ? '◐' : '☐'}</span>{' '}
            <span class="sr-only">{t.status.replace('_', ' ')}: </span>
            {t.status === 'in_progress' && t.activeForm ? t.activeForm : t.subject}
          </li>
        ))}
      </ul>
    </details>
  );
}

function Composer({ session, busy }: { session: string; busy: boolean }) {
  const [text, setText] = useState(() => sessionStorage.getItem('betcode.draft.' + session) || '');
  const [files, setFiles] = useState<FileAttachment[]>([]);
  const [sending, setSending] = useState(false);
  const setDraft = (t: string) => {
    setText(t);
    try {
      sessionStorage.setItem('betcode.draft.' + session, t);
    } catch {
      /* ignore */
    }
  };
  const send = async (e?: Event) => {
    e?.preventDefault();
    if ((!text.trim() && !files.length) || sending) return;
    setSending(true);
    try {
      await sendMessage(session, text, files);
      setDraft('');
      setFiles([]);
    } catch (err) {
      toast('Not sent: ' + errText(err));
    } finally {
      setSending(false);
    }
  };
  const attach = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    try {
      if (input.files?.length) setFiles([...files, ...(await readImages(input.files, files))]);
    } catch (err) {
      toast(errText(err));
    }
    input.value = '';
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && (e.metaKey || e.ctrlKey || matchMedia('(pointer: fine)').matches)) {
      e.preventDefault();
      void send();
    }
  };
  return (
    <form class="composer" onSubmit={send}>
      <Attachments files={files} onRemove={(i) => setFiles(files.filter((_, j) => j !== i))} />
      <div class="composer-row">
        <label class="icon-btn file-btn" title="Attach image">
          <svg viewBox="0 0 24 24" aria-hidden="true"><path d="M21 12l-8.5 8.5a5 5 0 01-7-7L14 5a3.5 3.5 0 015 5l-8.5 8.5a2 2 0 01-3-3L15 8" /></svg>
          <input type="file" accept="image/*" multiple class="visually-hidden-file" onChange={attach} aria-label="Attach image" />
        </label>
        <label for="message" class="sr-only">Message</label>
        <textarea
          id="message"
          rows={1}
          data-testid="message-input"
          placeholder="Message Claude…"
          value={text}
          onInput={(e) => setDraft((e.target as HTMLTextAreaElement).value)}
          onKeyDown={onKey}
        />
        <button type="button" class="btn danger" data-testid="cancel-turn" aria-label="Stop the turn" disabled={!busy} onClick={() => cancelTurn(session).catch((e) => toast(errText(e)))}>
          Stop
        </button>
        <button type="submit" class="btn primary" data-testid="send-message" aria-label="Send message" disabled={sending || (!text.trim() && !files.length)}>
          Send
        </button>
      </div>
    </form>
  );
}
