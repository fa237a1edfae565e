import { Component } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, q } from '../api';
import { editsOf, type DiffLine } from '../diff';
import { advance, cachedMarkdown, newMd, parseChunks, tailSrc, type MdState } from '../mdstream';
import { renderMarkdown } from '../markdown';
import { buildAnswers, choose, optionValue, parseAnswered } from '../questions';
import {
  answerPermission, answerQuestion, cancelTurn, catchUpRest, conv, errText, isBusy, isOpen, onNextFrame, paired, putSession, saveConvs,
  sendMessage, state, subscribe, toast, unsubscribe, useAppState, type Conv, type Item, type PermItem,
  type QuestionItem, type TextItem, type ToolItem,
} from '../store';
import { href } from '../router';
import type { FileAttachment, Session } from '../types';
import { Attachments, money, readImages, ScrollPre, Spinner, StatusChip, TopBar } from './common';
import { shortPath } from './Sessions';
import { TeamPanel } from './Team';
import { appendText, useVoice } from './VoiceButton';
import { READ_ONLY_WAIT, readOnlyShare, ShareBanner, shareOf } from './ShareBanner';
import { SharePanel } from './SharePanel';

export function Conversation({ machine, session }: { machine: string; session: string }) {
  const s = useAppState();
  const c = conv(session);
  const sess = s.sessions.get(session);
  const logRef = useRef<HTMLDivElement>(null);
  const endRef = useRef<HTMLDivElement>(null);
  const follow = useRef({ stick: true, toEnd: () => {}, from: 0 });
  const [extra, setExtra] = useState(0);

  useEffect(() => {
    // Another session in the same view: follow its end, newest items only.
    follow.current.stick = true;
    follow.current.from = 0;
    setExtra(0);
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

  // Keep the newest output in view unless the user scrolled up to read, without reading layout
  // after a write: the CSS pins the scroll to the sentinel after the last item (overflow-anchor),
  // and where that does not work an IntersectionObserver on the sentinel scrolls to it once the
  // frame is laid out (its callback runs then, so reading scrollHeight costs no layout). The
  // sentinel leaving the view because the user scrolled (wheel, touch, keys, scrollbar) or moved
  // the keyboard focus to an item above (the browser scrolls it into view) unsticks.
  useEffect(() => {
    const log = logRef.current;
    const end = endRef.current;
    if (!log || !end) return;
    const f = follow.current;
    let userAt = 0;
    const SCROLL_KEYS = /^(Page(Up|Down)|Arrow(Up|Down)|Home|End| )$/;
    const mark = (e: Event) => {
      // A scroll by the user: wheel, a finger, the scrollbar, a key on the focused log, Tab to an
      // item (focus-visible: a tap on a button focuses it too, and must not unstick).
      if (
        e.type === 'wheel' ||
        e.type === 'touchmove' ||
        (e.target === log && (e.type === 'pointerdown' || SCROLL_KEYS.test((e as KeyboardEvent).key))) ||
        (e.type === 'focusin' && e.target !== log && (e.target as Element).matches(':focus-visible'))
      )
        userAt = performance.now();
    };
    const evs = ['wheel', 'touchmove', 'keydown', 'pointerdown', 'focusin'] as const;
    evs.forEach((t) => log.addEventListener(t, mark, { passive: true }));
    const toEnd = () => void (log.scrollTop = log.scrollHeight);
    f.toEnd = () => {
      f.stick = true;
      requestAnimationFrame(toEnd);
    };
    let io: IntersectionObserver | undefined;
    if (typeof IntersectionObserver !== 'undefined') {
      io = new IntersectionObserver(
        (es) => {
          if (es[es.length - 1].isIntersecting) f.stick = true;
          else if (performance.now() - userAt < 1500) f.stick = false;
          else if (f.stick) toEnd();
        },
        { root: log },
      );
      io.observe(end);
    }
    return () => {
      io?.disconnect();
      evs.forEach((t) => log.removeEventListener(t, mark));
    };
  }, []);
  const toBottom = () => follow.current.toEnd();

  // Only the newest items are in the DOM (older ones on request): the DOM, and each frame's diff
  // of the list, stay small however long the session.
  // While the user reads above, the window does not move (no jump when old items would drop).
  const fl = follow.current;
  const want = Math.max(0, c.items.length - WINDOW - extra);
  if (fl.stick || want < fl.from || fl.from > c.items.length) fl.from = want;
  const from = fl.from;
  const title = sess?.name || sess?.lastMessage?.split('\n')[0].slice(0, 60) || 'Session';
  const busy = isBusy(session);
  const share = shareOf(machine); // a session shared with this browser: no writing, no Changes
  return (
    <div class="conv-page">
      <TopBar title={title} back={href.sessions(machine)} backLabel="Sessions">
        {!share && <a class="btn small-btn" href={href.changes(machine, session)} data-testid="changes-tab">Changes</a>}
      </TopBar>
      <main id="main" class="conv-main">
        <div class="conv-status small muted" role="group" aria-label="Session status">
          {sess && <StatusChip s={{ status: sess.status, agentStatus: (c.agentStatus as Session['agentStatus']) || sess.agentStatus }} />}
          {sess && <span title={sess.cwd}>{shortPath(sess.cwd)}</span>}
          {(c.model || sess?.model) && <span>{c.model || sess?.model}</span>}
          {sess && <span>{money(sess.costUsd)}</span>}
          {sess && <span>{fmt(sess.inputTokens)} in / {fmt(sess.outputTokens)} out</span>}
          {typeof c.contextPct === 'number' && <span>context {Math.round(c.contextPct)}%</span>}
          {c.planMode && <span class="chip">plan mode</span>}
        </div>
        {share ? <ShareBanner share={share} /> : (paired(machine) || s.info?.role === 'agent') && <SharePanel session={session} />}
        <div
          class="log"
          ref={logRef}
          data-testid="conversation"
          role="log"
          aria-live="polite"
          aria-relevant="additions text"
          aria-label="Conversation"
          tabIndex={0}
        >
          {!c.items.length && !c.replayed && <Spinner label="Loading the conversation" />}
          {from > 0 && (
            <button type="button" class="btn earlier" onClick={() => setExtra(extra + WINDOW)}>
              Show earlier ({from} more)
            </button>
          )}
          {(from ? c.items.slice(from) : c.items).map((it) => (
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
          <div class="log-end" ref={endRef} aria-hidden="true" />
        </div>
        <TeamPanel session={session} todos={c.tasks} />
        {!share && <Composer session={session} busy={busy} onSend={toBottom} />}
      </main>
    </div>
  );
}

const WINDOW = 150;

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
        // A short finished text is parsed whole (once); a long or streaming one in blocks.
        return it.done && it.text.length <= BLOCK_WHOLE && !mdStates.has(it) ? <MarkdownBlock text={it.text} /> : <StreamingMarkdown item={it} />;
      case 'user':
        return <div class="user-msg"><span class="sr-only">You: </span>{it.text}</div>;
      case 'tool':
        return <ToolCard it={it} />;
      case 'perm':
        return <Permission it={it} c={c} open={open} />;
      case 'question':
        return <Question it={it} c={c} open={open} />;
      case 'note':
        if (it.kind === 'plan') return <div class="plan card"><strong>Plan</strong><MarkdownBlock text={it.text} /></div>;
        return <p class={'note ' + it.kind} role={it.kind === 'error' ? 'alert' : undefined}>{it.text}</p>;
    }
  }
}

const BLOCK_WHOLE = 4096;

/** Re-renders the calling component on the next frame (work it deferred for lack of budget). */
function useRetry(): () => void {
  const [, kick] = useState(0);
  return () => onNextFrame(() => kick((x) => x + 1));
}

function MarkdownBlock({ text }: { text: string }) {
  const retry = useRetry();
  // renderMarkdown escapes all HTML of the source and filters link targets.
  const html = cachedMarkdown(text);
  if (html === undefined) retry();
  return <div class="md assistant" data-testid="assistant-text" aria-busy={html === undefined} dangerouslySetInnerHTML={{ __html: html ?? '' }} />;
}

/** One parsed block: compared by its HTML string, so an unchanged block costs nothing. */
class Chunk extends Component<{ html: string; cont: boolean }> {
  shouldComponentUpdate(n: { html: string; cont: boolean }) {
    return n.html !== this.props.html || n.cont !== this.props.cont;
  }
  render({ html, cont }: { html: string; cont: boolean }) {
    return <div class={cont ? 'md-chunk cont' : 'md-chunk'} dangerouslySetInnerHTML={{ __html: html }} />;
  }
}

/**
 * Streaming (or long) text, rendered incrementally (src/mdstream.ts): finished blocks are parsed
 * once, only the tail on each frame. Blocks not parsed when the frame's budget ran out (a long
 * text arriving at once, a replay) show on the next frames.
 */
const mdStates = new WeakMap<object, MdState>();

function StreamingMarkdown({ item }: { item: TextItem }) {
  const retry = useRetry();
  let s = mdStates.get(item);
  if (!s || s.pos > item.text.length) mdStates.set(item, (s = newMd()));
  advance(s, item.text);
  const ready = parseChunks(s);
  const all = ready === s.chunks.length;
  if (!all) retry();
  const tail = all ? tailSrc(s, item.text) : '';
  return (
    // No class toggles on this (maybe huge) element when streaming ends: that restyles all of it.
    <div class="md assistant" data-testid="assistant-text" aria-busy={!item.done || !all}>
      {s.chunks.slice(0, ready).map((ch, i) => (
        <Chunk key={i} html={ch.html!} cont={ch.cont} />
      ))}
      {tail && <div class={s.cont ? 'md-chunk cont' : 'md-chunk'} dangerouslySetInnerHTML={{ __html: renderMarkdown(tail) }} />}
      {!item.done && <span class="cursor" aria-hidden="true" />}
    </div>
  );
}

export function DiffView({ lines, label }: { lines: DiffLine[]; label: string }) {
  return (
    <ScrollPre class="diff" label={label}>
      {lines.map((l, i) => (
        <span key={i} class={l.t === '+' ? 'd-add' : l.t === '-' ? 'd-del' : l.t === '@' ? 'd-hunk' : 'd-ctx'}>
          <span class="d-sign" aria-hidden="true">{l.t === '@' ? ' ' : l.t}</span>
          {l.t === '+' ? <span class="sr-only">added: </span> : l.t === '-' ? <span class="sr-only">removed: </span> : null}
          {l.s}
          {'\n'}
        </span>
      ))}
    </ScrollPre>
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
  if (typeof input.command === 'string') return <ScrollPre class="code cmd" label="Command">{input.command}</ScrollPre>;
  const keys = Object.keys(input);
  if (!keys.length) return null;
  return <ScrollPre class="code" label={`${toolName} input`}>{JSON.stringify(input, null, 2)}</ScrollPre>;
}

// A tool's output shows OUT_FIRST characters, then OUT_MORE more per click: a huge output never
// goes into the DOM at once. The body of a closed card is not rendered at all.
const OUT_FIRST = 8192;
const OUT_MORE = 65536;

function ToolCard({ it }: { it: ToolItem }) {
  const [open, setOpen] = useState(false);
  const [shown, setShown] = useState(OUT_FIRST);
  const out = it.output ?? '';
  const state = !it.done ? 'running' : it.isError ? 'failed' : 'done';
  const sum = summary(it.toolName, it.input, it.description);
  return (
    <details class={'tool card st-' + state} data-testid="tool-card" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      {/* Named by its visible text (WCAG 2.5.3, label in name); the state's mark is spelled out. */}
      <summary>
        <span class="tool-name">{it.toolName}</span>
        <span class="grow ellipsis tool-sum">{sum}</span>
        <span class={'tool-state ' + state}>
          <span aria-hidden="true">{state === 'running' ? '…' : state === 'failed' ? '✗' : '✓'}</span>
          <span class="sr-only">, {state}</span>
          {typeof it.durationMs === 'number' && it.done ? ` ${(it.durationMs / 1000).toFixed(1)}s` : ''}
        </span>
      </summary>
      {open && (
        <div class="tool-body">
          {it.description && <p class="muted small">{it.description}</p>}
          <InputView toolName={it.toolName} input={it.input} />
          {it.done && (
            <>
              <div class="small muted" aria-hidden="true">{it.isError ? 'Error' : 'Result'}</div>
              <ScrollPre class={'code out' + (it.isError ? ' err' : '')} label={it.isError ? 'Error' : 'Result'}>
                {out.length <= shown ? out : out.slice(0, shown)}
              </ScrollPre>
              {out.length > shown && (
                <button type="button" class="btn" onClick={() => setShown(shown + OUT_MORE)}>
                  Show more ({Math.round((out.length - shown) / 1024)} KB left)
                </button>
              )}
            </>
          )}
        </div>
      )}
    </details>
  );
}

const ANSWER_TEXT: Record<string, string> = { allow: 'Allowed once', allowSession: 'Allowed for this session', deny: 'Denied' };

function Permission({ it, c, open: live }: { it: PermItem; c: Conv; open: boolean }) {
  const ro = live && readOnlyShare();
  const open = live && !ro;
  const [reason, setReason] = useState('');
  const voice = useVoice((t) => setReason((r) => appendText(r, t)), 'a deny reason');
  const answered = c.answered.get(it.requestId);
  const id = 'perm-' + it.requestId;
  return (
    <section class={'card prompt' + (open ? ' open' : '')} data-testid="permission-prompt" data-request-id={it.requestId} aria-labelledby={id + '-h'}>
      <h2 id={id + '-h'} class="prompt-title">
        <span class="tool-name">{it.toolName}</span> wants permission
      </h2>
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
          <div class="voice-row">
            <input id={id + '-reason'} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} placeholder="Tell Claude why" />
            {voice.button}
          </div>
          {voice.status}
        </>
      ) : (
        <p class="muted small" role="status">{ro ? READ_ONLY_WAIT : answered ? ANSWER_TEXT[answered] || answered : 'No longer waiting (answered, timed out or cancelled)'}</p>
      )}
    </section>
  );
}

function Question({ it, c, open: live }: { it: QuestionItem; c: Conv; open: boolean }) {
  const ro = live && readOnlyShare();
  const open = live && !ro;
  const [chosen, setChosen] = useState<string[][]>([]);
  const sending = c.sending.has(it.questionId);
  const answered = parseAnswered(c.answered.get(it.questionId));
  const answers = buildAnswers(it.questions, chosen);
  const base = 'q-' + it.questionId;
  const submit = (e: Event) => {
    e.preventDefault();
    if (answers && open && !sending) void answerQuestion(c.sessionId, it.questionId, answers);
  };
  const many = it.questions.length > 1;
  return (
    <form class={'card prompt' + (open ? ' open' : '')} data-testid="question" onSubmit={submit} aria-label={many ? `${it.questions.length} questions from Claude` : 'Question from Claude'}>
      {it.questions.map((a, qi) => {
        const got = typeof answered === 'object' ? answered[a.question] : qi === 0 ? answered : undefined;
        return (
          <fieldset key={qi} disabled={!open || sending} class="ask">
            <legend class="prompt-title">{a.question}</legend>
            {a.multiSelect && <p class="muted small">Choose any number.</p>}
            <div class="options">
              {a.options.map((o, i) => {
                const v = optionValue(o);
                return (
                  <label key={i} class="option" data-testid="question-option">
                    <input
                      type={a.multiSelect ? 'checkbox' : 'radio'}
                      name={`${base}-${qi}`}
                      value={v}
                      checked={(chosen[qi] || []).includes(v) || (!open && !!got && got.split(', ').includes(v))}
                      onChange={() => setChosen(choose(chosen, qi, v, a.multiSelect))}
                    />
                    <span>
                      <span class="opt-label">{o.label || o.value}</span>
                      {o.description && <span class="muted small block">{o.description}</span>}
                    </span>
                  </label>
                );
              })}
            </div>
            {!open && got && <p class="muted small">Answered: {got}</p>}
          </fieldset>
        );
      })}
      {open && !sending ? (
        <button type="submit" class="btn primary" data-testid="question-submit" disabled={!answers}>
          {many ? 'Answer all' : 'Answer'}
        </button>
      ) : (
        <p class="muted small" role="status">
          {ro ? READ_ONLY_WAIT : sending ? 'Sending…' : c.already.has(it.questionId) ? 'Already answered (or timed out)' : answered ? 'Answered' : 'No longer waiting'}
        </p>
      )}
    </form>
  );
}

function Composer({ session, busy, onSend }: { session: string; busy: boolean; onSend: () => void }) {
  const [text, setText] = useState(() => sessionStorage.getItem('betcode.draft.' + session) || '');
  const [files, setFiles] = useState<FileAttachment[]>([]);
  const [sending, setSending] = useState(false);
  const voice = useVoice((t) => setDraft(appendText(text, t)), 'a message');
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
    onSend();
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
        {voice.button}
        <button type="button" class="btn danger" data-testid="cancel-turn" aria-label="Stop the turn" disabled={!busy} onClick={() => cancelTurn(session).catch((e) => toast(errText(e)))}>
          Stop
        </button>
        <button type="submit" class="btn primary" data-testid="send-message" aria-label="Send message" disabled={sending || (!text.trim() && !files.length)}>
          Send
        </button>
      </div>
      {voice.status}
    </form>
  );
}
