// The inbox across machines: everything waiting on the user on every machine this device paired
// with (permission prompts, questions, turns that ended with an error, finished turns not yet
// seen), newest first. The current machine's sessions are the store's (its event stream); every
// other paired machine gets a watcher: an event socket with no subscriptions inside that
// machine's end-to-end channel (docs/e2ee-wire.md §2), which brings the session list's snapshot
// and its changes (pending prompts are inside each Session). Nothing here goes to the relay in
// clear. The count is the app icon's badge (Badging API) and the title's "(N) BetCode".

import type { EventSocket } from './e2ee';
import { closePromptNotification } from './notifications';
import { addAsk, type Ask } from './questions';
import { parse } from './router';
import {
  answerPermission, answerQuestion, channelFor, changed, conv, keepChannels, mergeSession, onChange, postVia, reconnectDelay, state,
  stateVersion,
} from './store';
import type { Session, StreamEvent } from './types';

/** One item waiting on the user. */
export interface InboxItem {
  /** Unique in the inbox: machine/session/prompt (or /error, /done). */
  id: string;
  kind: 'permission' | 'question' | 'error' | 'done';
  machineId: string;
  machineName: string;
  session: Session;
  /** When it started waiting (RFC 3339): the prompt's ts, else the session's updatedAt. */
  at: string;
  /** A permission request's id or a question's id. */
  promptId?: string;
  toolName?: string;
  description?: string;
  input?: Record<string, unknown>;
  questions?: Ask[];
}

/** A paired machine's session list as its watcher last saw it. */
export interface Feed {
  machineId: string;
  sessions: Map<string, Session>;
  conn: 'opening' | 'open' | 'retrying';
  error: string;
  sock?: EventSocket;
  timer?: ReturnType<typeof setTimeout>;
  attempt: number;
  stopped: boolean;
}

/** The watchers of the paired machines other than the current one. */
export const feeds = new Map<string, Feed>();

/** Bumped whenever a watcher's input changed; the items are recomputed once per version. */
let version = 1;
let cached: { v: number; sv: number; items: InboxItem[] } | undefined;

/** Marks the inbox changed (a watcher's message, an answer, a seen turn). */
export function inboxChanged() {
  version++;
  changed();
}

// ---------------------------------------------------------------- seen turns (this device)

const SEEN = 'betcode.seen';
let seen: Record<string, string> | undefined;

function seenMap(): Record<string, string> {
  if (seen) return seen;
  try {
    seen = JSON.parse(localStorage.getItem(SEEN) || '{}') || {};
  } catch {
    seen = {};
  }
  return seen!;
}

function saveSeen() {
  try {
    localStorage.setItem(SEEN, JSON.stringify(seenMap()));
  } catch {
    /* private mode: seen until the tab closes */
  }
}

/** Records that the user saw session sid of machine mid as of its updatedAt. */
export function markSeen(mid: string, sid: string, updatedAt: string) {
  const m = seenMap();
  const k = mid + '/' + sid;
  if ((m[k] || '') >= updatedAt) return;
  m[k] = updatedAt;
  saveSeen();
  inboxChanged();
}

/**
 * The first time the inbox sees a machine, what already finished there counts as seen: only
 * turns that end from then on are news.
 */
function baseline(mid: string, sessions: Iterable<Session>) {
  const m = seenMap();
  if (m[mid + '/'] !== undefined) return;
  m[mid + '/'] = new Date().toISOString();
  for (const s of sessions) m[mid + '/' + s.id] = s.updatedAt || '';
  saveSeen();
}

// ---------------------------------------------------------------- items

/** Whether the inbox is the home: more than one machine paired (on a relay). */
export const inboxHome = () => state.info?.role !== 'agent' && state.pairings.length > 1;

/** The name machine mid was paired under (the current machine's own name), else its id. */
export function machineName(mid: string): string {
  const p = state.pairings.find((x) => x.machineId === mid);
  return p?.machineName || (mid === state.machineId ? state.machine?.name : '') || mid;
}

/** The items of one machine's sessions. */
function itemsOf(mid: string, sessions: Iterable<Session>, out: InboxItem[]) {
  const name = machineName(mid);
  const m = seenMap();
  const current = mid === state.machineId;
  for (const s of sessions) {
    const c = current ? state.convs.get(s.id) : undefined;
    let groups: Map<string, InboxItem> | undefined;
    for (const ev of s.pending || []) {
      if (ev.type === 'permission_request') {
        const rid = String(ev.requestId || '');
        if (!rid || c?.resolved.has(rid) || c?.answered.has(rid)) continue;
        out.push({
          id: `${mid}/${s.id}/${rid}`, kind: 'permission', machineId: mid, machineName: name, session: s,
          at: String(ev.ts || s.updatedAt || ''), promptId: rid, toolName: String(ev.toolName || ''),
          description: String(ev.description || ''), input: (ev.input as Record<string, unknown>) || {},
        });
      } else if (ev.type === 'question') {
        const qid = String(ev.questionId || '');
        if (!qid || c?.resolved.has(qid) || c?.answered.has(qid)) continue;
        groups ??= new Map();
        let g = groups.get(qid);
        if (!g) {
          g = {
            id: `${mid}/${s.id}/${qid}`, kind: 'question', machineId: mid, machineName: name, session: s,
            at: String(ev.ts || s.updatedAt || ''), promptId: qid, questions: [],
          };
          groups.set(qid, g);
          out.push(g);
        }
        addAsk(g.questions!, ev);
      }
    }
    if (s.pendingPrompts > 0 || s.status === 'running' || s.status === 'starting' || s.status === 'waiting') continue;
    const k = mid + '/' + s.id;
    if ((m[k] || '') >= (s.updatedAt || '')) continue;
    if (s.status === 'error') {
      out.push({ id: k + '/error', kind: 'error', machineId: mid, machineName: name, session: s, at: s.updatedAt });
    } else if (s.status === 'completed' && s.messageCount > 0) {
      out.push({ id: k + '/done', kind: 'done', machineId: mid, machineName: name, session: s, at: s.updatedAt });
    }
  }
}

/** Everything waiting on the user, newest first. */
export function inboxItems(): InboxItem[] {
  const sv = stateVersion();
  if (cached && cached.v === version && cached.sv === sv) return cached.items;
  const out: InboxItem[] = [];
  if (state.machineId && state.sessionsLoaded) {
    baseline(state.machineId, state.sessions.values());
    itemsOf(state.machineId, state.sessions.values(), out);
  }
  for (const f of feeds.values()) if (f.machineId !== state.machineId) itemsOf(f.machineId, f.sessions.values(), out);
  // Newest first (RFC 3339 strings compare as times), then by id: a stable order.
  out.sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  cached = { v: version, sv, items: out };
  return out;
}

// ---------------------------------------------------------------- answers

/**
 * Answers prompt it of a watched machine (not the current one) through that machine's own
 * channel, and drops it from the machine's list at once (its watcher confirms it).
 */
async function answerElsewhere(it: InboxItem, kind: 'permissions' | 'questions', body: unknown) {
  const sid = it.session.id;
  const id = it.promptId!;
  await postVia(it.machineId, `/sessions/${encodeURIComponent(sid)}/${kind}/${encodeURIComponent(id)}`, body);
  closePromptNotification(sid, id); // the machine sends the answering device no resolution
  const s = feeds.get(it.machineId)?.sessions.get(sid);
  if (!s?.pending) return;
  s.pending = s.pending.filter((p) => p.requestId !== id && p.questionId !== id);
  s.pendingPrompts = s.pending.length;
  inboxChanged();
}

/** Answers a permission prompt of any paired machine, in place. */
export async function answerPermissionIn(it: InboxItem, behavior: 'allow' | 'allowSession' | 'deny') {
  if (it.machineId !== state.machineId) return answerElsewhere(it, 'permissions', { behavior });
  conv(it.session.id);
  await answerPermission(it.session.id, it.promptId!, behavior);
  inboxChanged();
}

/** Answers a question of any paired machine, in place. */
export async function answerQuestionIn(it: InboxItem, answers: Record<string, string>) {
  if (it.machineId !== state.machineId) return answerElsewhere(it, 'questions', { answers });
  conv(it.session.id);
  await answerQuestion(it.session.id, it.promptId!, answers);
  inboxChanged();
}

// ---------------------------------------------------------------- watchers

function putFeedSession(f: Feed, s: Session) {
  f.sessions.set(s.id, mergeSession(f.sessions.get(s.id), s));
}

function onFeedMessage(f: Feed, m: StreamEvent) {
  switch (m.type) {
    case 'snapshot': {
      f.conn = 'open';
      f.attempt = 0;
      f.error = '';
      f.sessions = new Map();
      for (const s of (m.sessions as Session[]) || []) f.sessions.set(s.id, s);
      baseline(f.machineId, f.sessions.values());
      break;
    }
    case 'session_created':
    case 'session_updated':
      putFeedSession(f, m.session as Session);
      break;
    case 'session_status': {
      const s = f.sessions.get(m.sessionId!);
      if (s) putFeedSession(f, { ...s, status: m.status as Session['status'], agentStatus: m.agentStatus as Session['agentStatus'] });
      break;
    }
    case 'session_deleted':
      f.sessions.delete(m.sessionId!);
      break;
    case 'permission_resolved': {
      const s = f.sessions.get(m.sessionId!);
      if (s?.pending) s.pending = s.pending.filter((p) => p.requestId !== m.requestId && p.questionId !== m.requestId);
      break;
    }
    default:
      return;
  }
  inboxChanged();
}

async function openFeed(f: Feed) {
  clearTimeout(f.timer);
  if (f.stopped) return;
  f.conn = f.attempt ? 'retrying' : 'opening';
  try {
    const ch = await channelFor(f.machineId);
    if (f.stopped) return;
    const sock = ch.openEvents([]);
    f.sock = sock;
    sock.onmessage = (ev) => {
      if (f.sock !== sock) return;
      try {
        onFeedMessage(f, JSON.parse(ev.data as string));
      } catch {
        /* not JSON */
      }
    };
    sock.onclose = () => {
      if (f.sock !== sock) return;
      f.sock = undefined;
      retryFeed(f, 'the machine closed the stream');
    };
  } catch (e) {
    retryFeed(f, (e as Error)?.message || String(e));
  }
}

function retryFeed(f: Feed, why: string) {
  if (f.stopped) return;
  f.conn = 'retrying';
  f.error = why;
  inboxChanged();
  // The event stream's schedule: a machine's feed comes back within seconds of the machine.
  const delay = reconnectDelay(f.attempt, undefined);
  f.attempt++;
  f.timer = setTimeout(() => void openFeed(f), delay);
}

function stopFeed(f: Feed) {
  f.stopped = true;
  clearTimeout(f.timer);
  const s = f.sock;
  f.sock = undefined;
  s?.close();
  feeds.delete(f.machineId);
  keepChannels.delete(f.machineId);
}

let feedKey = '';

/** Starts and stops watchers to match the pairings (more than one) and the current machine. */
function syncFeeds() {
  const want = inboxHome() ? state.pairings.map((p) => p.machineId).filter((id) => id !== state.machineId) : [];
  const key = want.join('\n');
  if (key === feedKey) return;
  feedKey = key;
  for (const f of [...feeds.values()]) if (!want.includes(f.machineId)) stopFeed(f);
  for (const mid of want) {
    if (feeds.has(mid)) continue;
    const f: Feed = { machineId: mid, sessions: new Map(), conn: 'opening', error: '', attempt: 0, stopped: false };
    feeds.set(mid, f);
    keepChannels.add(mid);
    void openFeed(f);
  }
  inboxChanged();
}

/** Watchers whose stream is down reconnect now (the app is visible again, or back online). */
export function wakeFeeds() {
  for (const f of feeds.values()) {
    if (!f.sock && !f.stopped) {
      f.attempt = 0;
      void openFeed(f);
    }
  }
}

// ---------------------------------------------------------------- seen while viewed, badge, title

let lastCount = -1;
let badgeTimer: ReturnType<typeof setTimeout> | undefined;

function updateBadge() {
  badgeTimer = undefined;
  // The conversation on screen is seen as of now.
  const r = parse(location.hash);
  if (r.name === 'conversation' && r.machine === state.machineId && document.visibilityState === 'visible') {
    const s = state.sessions.get(r.session!);
    if (s?.updatedAt && state.convs.get(s.id)?.want) markSeen(state.machineId, s.id, s.updatedAt);
  }
  const n = state.booted ? inboxItems().length : 0;
  if (n === lastCount) return;
  lastCount = n;
  document.title = n ? `(${n}) BetCode` : 'BetCode';
  const nav = navigator as Navigator & { setAppBadge?: (n?: number) => Promise<void>; clearAppBadge?: () => Promise<void> };
  if (n && nav.setAppBadge) nav.setAppBadge(n).catch(() => {});
  else if (!n && nav.clearAppBadge) nav.clearAppBadge().catch(() => {});
}

/** Starts the inbox: watchers, the badge and the title follow the state from now on. */
export function startInbox() {
  onChange(() => {
    syncFeeds();
    if (!badgeTimer) badgeTimer = setTimeout(updateBadge, 200);
  });
  addEventListener('online', wakeFeeds);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') wakeFeeds();
  });
  document.addEventListener('resume', wakeFeeds);
}

/**
 * Benchmark hook (web/e2e/inbox.mjs, docs/benchmarks.md): shows synthetic machines' sessions as
 * watched feeds, to time the inbox's render on data alone. Local to the page: nothing is sent.
 */
export function feedSynthetic(machines: { machineId: string; sessions: Session[] }[]) {
  for (const f of [...feeds.values()]) if (f.stopped) feeds.delete(f.machineId); // the last synthetic feed
  for (const m of machines) {
    const f: Feed = { machineId: m.machineId, sessions: new Map(), conn: 'open', error: '', attempt: 0, stopped: true };
    for (const s of m.sessions) f.sessions.set(s.id, s);
    feeds.set(m.machineId, f);
  }
  inboxChanged();
}
