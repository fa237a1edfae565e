// App state: auth, machine, sessions, and one conversation model per subscribed session, fed by
// the one WebSocket (/api/ws), or, for a machine this device paired with, by the event socket
// inside its end-to-end channel (docs/e2ee-wire.md §2). Rendering is batched: every change marks the state dirty and one
// requestAnimationFrame re-renders, so a flood of text deltas costs one render per frame.

import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, get, newKey, patch, post, setAuth, setChannel, setUnauthorizedHandler } from './api';
import { getCurrentMachine, listPairings, loadOrCreateDeviceKey, openChannel, removePairing, setCurrentMachine, type EventSocket, type Pairing, type WebChannel } from './e2ee';
import { frameBegin, retryNextFrame, takeRetries } from './frame';
import { idbDel, idbGet, idbSet } from './idb';
import { closePromptNotification } from './notifications';
import { addAsk, type Ask } from './questions';
import type {
  FileAttachment, Info, Machine, Me, PermissionRule, Session, StreamEvent, Task,
} from './types';

// ---------------------------------------------------------------- conversation items

export interface TextItem { k: 'text'; key: string; v: number; text: string; done: boolean }
/**
 * local: shown before the stream showed it, kept below what streams meanwhile; queued: in the
 * outbox; sent: the text the stream will carry, when text shows more (its attachments).
 */
export interface UserItem { k: 'user'; key: string; v: number; text: string; local?: boolean; queued?: boolean; sent?: string }
export interface ToolItem {
  k: 'tool'; key: string; v: number; toolId: string; toolName: string; input: Record<string, unknown>;
  description: string; done: boolean; output?: string; isError?: boolean; durationMs?: number;
}
export interface PermItem {
  k: 'perm'; key: string; v: number; requestId: string; toolName: string; input: Record<string, unknown>;
  description: string; live: boolean;
}
/** One AskUserQuestion call: its question events (same questionId) grouped, in order. */
export interface QuestionItem { k: 'question'; key: string; v: number; questionId: string; questions: Ask[]; live: boolean }
export interface NoteItem { k: 'note'; key: string; v: number; kind: 'turn' | 'error' | 'usage' | 'plan' | 'info'; text: string }
export type Item = TextItem | UserItem | ToolItem | PermItem | QuestionItem | NoteItem;

export interface Conv {
  sessionId: string;
  items: Item[];
  lastSeq: number; // the last seq rendered: anything at or below it is dropped
  replayed: boolean;
  want: boolean; // subscribed (or to be, on the next hello)
  askedAt?: number; // when the subscription was last sent (hello or subscribe), or its replay last moved
  askedSeq?: number; // lastSeq then: a replay that moves on is answered
  tasks: Task[];
  agentStatus?: string;
  statusMessage?: string;
  model?: string;
  contextPct?: number;
  planMode?: boolean;
  ended?: string; // subscription_ended message
  resubTries?: number; // transient subscription_ended in a row, each subscribed again (resubscribeDelay)
  resolved: Set<string>; // prompt ids answered / timed out
  answered: Map<string, string>; // prompt id → what this client answered (a question: its answers as JSON)
  already: Set<string>; // prompt ids this client answered too late (409 PERMISSION_NOT_PENDING)
  sending: Set<string>; // prompt ids whose answer waits for its ack
  v: number;
}

// ---------------------------------------------------------------- app state

export type Theme = 'system' | 'light' | 'dark';
export type Conn = 'idle' | 'connecting' | 'open' | 'retrying';
/** The current machine's end-to-end channel: none (not a paired machine), or its state. */
export type Chan = 'none' | 'opening' | 'open' | 'reconnecting' | 'failed';

export const state = {
  booted: false,
  info: undefined as Info | undefined,
  token: '',
  machineId: '',
  me: undefined as Me | undefined,
  machines: [] as Machine[],
  machine: undefined as Machine | undefined,
  sessions: new Map<string, Session>(),
  sessionsLoaded: false,
  rules: [] as PermissionRule[],
  conn: 'idle' as Conn,
  online: typeof navigator === 'undefined' ? true : navigator.onLine,
  theme: 'system' as Theme,
  toast: '',
  convs: new Map<string, Conv>(),
  /** The machines this device paired with (IndexedDB, src/e2ee). */
  pairings: [] as Pairing[],
  chan: 'none' as Chan,
  chanError: '',
  /** Messages written but not yet taken by their machine (the outbox, IndexedDB). */
  outbox: 0,
  /** Catching up after a wake (visible again, resumed, back online) until the stream answers. */
  resyncing: false,
};

let version = 0;
const listeners = new Set<() => void>();
let scheduled = false;

/** Marks the state changed; listeners run once on the next animation frame. */
export function changed() {
  version++;
  if (scheduled) return;
  scheduled = true;
  const run = () => {
    if (!scheduled) return;
    scheduled = false;
    frameBegin();
    for (const f of takeRetries()) f();
    listeners.forEach((l) => l());
  };
  // A hidden tab gets no frames: a timer settles the state there.
  if (document.visibilityState === 'hidden') setTimeout(run, 500);
  else requestAnimationFrame(run);
}

/** Runs f (a re-render of work deferred for lack of budget) on the next frame. */
export function onNextFrame(f: () => void) {
  retryNextFrame(f);
  changed();
}

/** The state's version: it grows with every change. */
export const stateVersion = () => version;

/** Runs f after every change (at most once per frame); returns its removal. */
export function onChange(f: () => void): () => void {
  listeners.add(f);
  return () => void listeners.delete(f);
}

/** Re-renders the calling component whenever the state changes (at most once per frame). */
export function useAppState() {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set(version);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return state;
}

let toastTimer: ReturnType<typeof setTimeout> | undefined;
export function toast(msg: string) {
  state.toast = msg;
  changed();
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    state.toast = '';
    changed();
  }, 6000);
}

export function errText(e: unknown): string {
  if (e instanceof ApiError) return e.message + (e.code && e.status ? ` (${e.code})` : '');
  return (e as Error)?.message || String(e);
}

// ---------------------------------------------------------------- theme

export function applyTheme(t: Theme) {
  state.theme = t;
  try {
    localStorage.setItem('betcode.theme', t);
  } catch {
    /* private mode */
  }
  const root = document.documentElement;
  if (t === 'system') root.removeAttribute('data-theme');
  else root.setAttribute('data-theme', t);
  const dark = t === 'dark' || (t === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
  document.querySelector('meta[name="theme-color"]')?.setAttribute('content', dark ? '#111418' : '#f6f7f9');
  changed();
}

// ---------------------------------------------------------------- boot, login, machine

export async function boot() {
  let t: Theme = 'system';
  try {
    t = (localStorage.getItem('betcode.theme') as Theme) || 'system';
  } catch {
    /* ignore */
  }
  applyTheme(t);
  setUnauthorizedHandler(() => void logout('Your token was refused: log in again'));
  const info = get<Info>('/info', { machine: null }).then(
    (i) => {
      state.info = i;
      changed();
    },
    () => {},
  );
  // No IndexedDB (the user logs in each time): one try. A busy or failing one: try again for about
  // 3 s, and say why in the console, rather than boot as a device that paired nothing (and send the
  // user to the pairing screen).
  const tries = typeof indexedDB === 'undefined' ? 1 : 8;
  for (let i = 0; i < tries; i++) {
    try {
      state.token = (await idbGet<string>('token')) || '';
      state.machineId = (await idbGet<string>('machine')) || (await getCurrentMachine()) || '';
      state.pairings = await listPairings();
      outbox = (await idbGet<Outgoing[]>('outbox')) || [];
      state.outbox = outbox.length;
      break;
    } catch (e) {
      if (i === tries - 1) {
        console.error('BetCode: this browser storage (IndexedDB) cannot be read; the token and the pairings are not loaded', e);
        break;
      }
      console.warn('BetCode: reading this browser storage (IndexedDB) failed; trying again', e);
      await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** i, 800)));
    }
  }
  // Whether the app is served by a relay (paired machines go end to end, pairing is the home) or
  // by the agent itself (nothing changes) is in /api/info: wait for it a little.
  await Promise.race([info, new Promise((r) => setTimeout(r, 3000))]);
  setAuth(state.token, state.machineId);
  if (state.machineId) routeMachine(state.machineId);
  state.booted = true;
  changed();
  if (state.token) {
    loadMachines().catch(() => {});
    get<Me>('/me').then((m) => ((state.me = m), changed()), () => {});
  }
  watchLifecycle();
  if (state.token || paired(state.machineId)) connect();
}

// ---------------------------------------------------------------- paired machines, channels

/** The pairing of machine id, when calls to it go end to end (a relay serves the app). */
export function paired(id: string): Pairing | undefined {
  if (!id || state.info?.role === 'agent') return undefined;
  return state.pairings.find((p) => p.machineId === id);
}

/** Whether the app can drive a machine: logged in to the relay (or agent), or paired with one. */
export const hasAccess = () => !!state.token || (state.info?.role !== 'agent' && state.pairings.length > 0);

/** The name this device gives itself in channels and pairings. */
export function deviceName(): string {
  try {
    const n = localStorage.getItem('betcode.deviceName');
    if (n) return n;
  } catch {
    /* private mode */
  }
  const ua = navigator.userAgent;
  const os = /Android|iPhone|iPad|Windows|Mac OS X|CrOS|Linux/.exec(ua)?.[0]?.replace('Mac OS X', 'Mac').replace('CrOS', 'ChromeOS') || 'Browser';
  const br = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrome\/|Chromium\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : '';
  return br ? `${os} (${br})` : os;
}

export function setDeviceName(n: string) {
  try {
    localStorage.setItem('betcode.deviceName', n);
  } catch {
    /* private mode */
  }
}

/** One channel per paired machine, opened on first use and again after it ends. */
const channels = new Map<string, { ch?: WebChannel; opening?: Promise<WebChannel> }>();

function setChan(mid: string, c: Chan, err = '') {
  if (mid !== state.machineId) return;
  state.chan = c;
  state.chanError = err;
  changed();
}

/** The open channel to machine mid, or a new one. */
export function channelFor(mid: string): Promise<WebChannel> {
  const p = paired(mid);
  if (!p) return Promise.reject(new ApiError(0, 'NOT_PAIRED', 'This device is not paired with that machine'));
  const have = channels.get(mid);
  if (have?.ch && !have.ch.closed) return Promise.resolve(have.ch);
  if (have?.opening) return have.opening;
  const entry: { ch?: WebChannel; opening?: Promise<WebChannel> } = {};
  channels.set(mid, entry);
  setChan(mid, state.chan === 'open' || state.chan === 'reconnecting' || state.chan === 'failed' ? 'reconnecting' : 'opening');
  entry.opening = (async () => {
    const deviceKey = await loadOrCreateDeviceKey();
    return openChannel({
      machineId: mid, machineKey: p.machineKey, token: p.token, deviceKey,
      hello: { name: deviceName(), version: 'web ' + (state.info?.version || '') },
    });
  })().then(
    (ch) => {
      if (channels.get(mid) !== entry) {
        ch.close();
        throw new ApiError(0, 'CLOSED', 'The channel was closed');
      }
      entry.ch = ch;
      entry.opening = undefined;
      ch.onclose = (err) => {
        if (channels.get(mid) !== entry) return; // dropped for a new one, which reports its own state
        channels.delete(mid);
        setChan(mid, 'reconnecting', err?.message || '');
      };
      setChan(mid, 'open');
      return ch;
    },
    (err) => {
      if (channels.get(mid) === entry) {
        channels.delete(mid);
        setChan(mid, finalChannelError(err) ? 'failed' : 'reconnecting', (err as Error)?.message || String(err));
      }
      throw err;
    },
  );
  return entry.opening;
}

/** An error that retrying will not mend: the machine refused this device, or the relay its token. */
function finalChannelError(err: unknown): boolean {
  const e = err as { code?: string; wsCode?: number };
  return e?.code === 'REFUSED' || e?.wsCode === 4401 || e?.wsCode === 4403 || e?.code === 'HANDSHAKE' || e?.code === 'NO_ANSWER';
}

/** Machines whose channel stays open though not current (the inbox watches them: src/inbox.ts). */
export const keepChannels = new Set<string>();

/** Closes every channel but the current machine's and those the inbox watches. */
function closeOtherChannels() {
  for (const [mid, e] of channels) {
    if (mid === state.machineId || keepChannels.has(mid)) continue;
    channels.delete(mid);
    e.ch?.close();
  }
}

/** Routes machine calls through mid's channel when it is a paired machine, else over plain HTTPS. */
function routeMachine(mid: string) {
  closeOtherChannels();
  if (paired(mid)) {
    setChannel((method, path, body, signal) => channelFor(mid).then((ch) => ch.request(method, path, body, signal)));
    if (state.chan === 'none') state.chan = 'opening';
  } else {
    setChannel(undefined);
    state.chan = 'none';
    state.chanError = '';
  }
}

/** Re-reads the pairings (after pairing or forgetting one). */
export async function reloadPairings() {
  state.pairings = await listPairings();
  routeMachine(state.machineId);
  changed();
}

/** Forgets a paired machine on this device (the machine still lists the device until revoked there). */
export async function forgetPairing(mid: string) {
  await removePairing(mid);
  const e = channels.get(mid);
  channels.delete(mid);
  e?.ch?.close();
  if (mid === state.machineId) {
    disconnect();
    state.machineId = '';
    state.machine = undefined;
    state.sessions.clear();
    state.sessionsLoaded = false;
    state.convs.clear();
    idbDel('machine').catch(() => {});
    setCurrentMachine(undefined).catch(() => {});
  }
  await reloadPairings();
}

/** Validates a token with GET /api/me and stores it in IndexedDB. */
export async function login(token: string) {
  const me = await get<Me>('/me', { token, machine: null });
  state.token = token;
  state.me = me;
  try {
    await idbSet('token', token);
  } catch {
    toast('This browser cannot store the token: it is kept until the tab closes');
  }
  setAuth(token, state.machineId);
  await loadMachines().catch(() => {});
  connect();
  changed();
}

export async function logout(reason?: string) {
  // Paired machines stay: they need no relay login.
  const keep = !!paired(state.machineId);
  if (!keep) disconnect();
  state.token = '';
  state.me = undefined;
  state.machines = [];
  if (!keep) {
    state.sessions.clear();
    state.sessionsLoaded = false;
    state.convs.clear();
  }
  try {
    await idbDel('token');
    if (!keep) {
      await idbDel('machine');
      sessionStorage.clear();
    }
  } catch {
    /* ignore */
  }
  if (!keep) state.machineId = '';
  setAuth('', state.machineId);
  if (reason) toast(reason);
  location.hash = hasAccess() ? '#/machines' : '#/login';
  changed();
}

export async function loadMachines() {
  if (!state.token) return;
  const ms = await get<Machine[]>('/machines');
  state.machines = ms || [];
  if (!state.machineId) {
    // On the agent there is exactly one machine; on a relay the current one is a good default.
    const only =
      state.info?.role === 'agent' || state.machines.length === 1
        ? state.machines[0]
        : state.machines.find((m) => m.current);
    if (only) await useMachine(only.id, false);
  }
  state.machine = machineOf(state.machineId) ?? state.machine;
  changed();
}

/** What the app knows of machine id: the relay's record, or the pairing's. */
function machineOf(id: string): Machine | undefined {
  const p = paired(id);
  const m = state.machines.find((x) => x.id === id);
  if (p) return { online: true, current: false, ...m, id, name: m?.name || p.machineName };
  return m;
}

/** Makes id the machine of every call and of the WebSocket; switch also tells the relay. */
export async function useMachine(id: string, doSwitch: boolean) {
  if (doSwitch && !paired(id)) {
    const m = await post<Machine>(`/machines/${encodeURIComponent(id)}/switch`, {}, { machine: null });
    if (m) state.machine = m;
  }
  if (id === state.machineId) return;
  disconnect();
  state.machineId = id;
  state.machine = machineOf(id) ?? state.machine;
  setAuth(state.token, id);
  routeMachine(id);
  idbSet('machine', id).catch(() => {});
  if (paired(id)) setCurrentMachine(id).catch(() => {});
  state.sessions.clear();
  state.sessionsLoaded = false;
  state.convs.clear();
  changed();
  if (state.token || paired(id)) connect();
}

export async function loadSessions() {
  const list = await get<Session[]>('/sessions');
  const fresh = new Map<string, Session>();
  for (const s of list || []) fresh.set(s.id, { ...state.sessions.get(s.id), ...s });
  state.sessions = fresh;
  state.sessionsLoaded = true;
  changed();
}

/** Renames a session (PATCH /api/sessions/{id}); an empty name clears it. */
export async function renameSession(id: string, name: string) {
  const s = await patch<Session>(`/sessions/${encodeURIComponent(id)}`, { name: name.trim() });
  if (s) putSession(s);
}

/** Deletes a session (DELETE /api/sessions/{id}); the list drops it at once. */
export async function deleteSession(id: string) {
  await del(`/sessions/${encodeURIComponent(id)}`);
  forgetSession(id);
}

/** Drops a deleted session: from the list, and its conversation (memory and sessionStorage). */
function forgetSession(id: string) {
  state.sessions.delete(id);
  const c = state.convs.get(id);
  if (c) {
    c.ended = 'This session was deleted';
    c.want = false;
    c.v++;
  }
  try {
    sessionStorage.removeItem(convKey(id));
  } catch {
    /* ignore */
  }
  dirtyConvs.delete(id);
  changed();
}

export function sortedSessions(): Session[] {
  return [...state.sessions.values()].sort(
    (a, b) =>
      (b.pendingPrompts > 0 ? 1 : 0) - (a.pendingPrompts > 0 ? 1 : 0) ||
      (b.updatedAt || '').localeCompare(a.updatedAt || ''),
  );
}

/** s over old: a list's summary without pending prompts keeps the ones old had, unless it has none. */
export const mergeSession = (old: Session | undefined, s: Session): Session => ({
  ...old, ...s, pending: s.pending ?? (s.pendingPrompts === 0 ? [] : old?.pending),
});

export function putSession(s: Session) {
  state.sessions.set(s.id, mergeSession(state.sessions.get(s.id), s));
  changed();
}

// ---------------------------------------------------------------- WebSocket

/** The event stream: the WebSocket /api/ws, or the event socket inside a channel (a look-alike). */
type Sock = WebSocket | EventSocket;
const OPEN = 1; // WebSocket.OPEN, for both

let ws: Sock | undefined;
let opening = 0; // a channel's event socket is being set up (its generation), 0: none
let generation = 0;
let attempt = 0;
let retryTimer: ReturnType<typeof setTimeout> | undefined;
let retryHintMs: number | undefined; // the retryAfterMs of the error that came before the socket's close
let pingTimer: ReturnType<typeof setInterval> | undefined;
let lastMessageAt = 0;
let helloSubs = new Set<string>(); // sessions the hello subscribed to
const waiting = new Map<string, { resolve: () => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> }>();

function wsURL() {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws';
}

/** The subscriptions a new event stream starts with: every wanted conversation, after its last seq. */
function helloSubscriptions() {
  const subscriptions = [];
  const now = Date.now();
  for (const c of state.convs.values()) {
    if (!c.want) continue;
    subscriptions.push({ sessionId: c.sessionId, afterSequence: c.lastSeq });
    c.replayed = false;
    c.askedAt = now;
    c.askedSeq = c.lastSeq;
  }
  helloSubs = new Set(subscriptions.map((x) => x.sessionId));
  return subscriptions;
}

/** Whether the current machine can be connected to: a relay (or agent) login, or a pairing. */
const canConnect = () => !!state.machineId && (!!state.token || !!paired(state.machineId));

export function connect() {
  // No machine yet (a relay user with several and none current): the
  // machine picker comes first; choosing one connects.
  if (!canConnect() || ws || opening) return;
  clearTimeout(retryTimer);
  state.conn = attempt ? 'retrying' : 'connecting';
  changed();
  if (paired(state.machineId)) {
    void connectChannel();
    return;
  }
  let sock: WebSocket;
  try {
    sock = new WebSocket(wsURL());
  } catch {
    scheduleRetry();
    return;
  }
  ws = sock;
  sock.onopen = () => {
    sock.send(JSON.stringify({ type: 'hello', token: state.token, machine: state.machineId || undefined, subscriptions: helloSubscriptions() }));
    lastMessageAt = Date.now();
  };
  handle(sock);
}

/** Opens the event socket inside the current machine's channel (the channel first if needed). */
async function connectChannel() {
  const mid = state.machineId;
  const gen = ++generation;
  opening = gen;
  let ch: WebChannel;
  try {
    ch = await channelFor(mid);
  } catch (e) {
    if (opening !== gen) return;
    opening = 0;
    if (finalChannelError(e)) {
      state.conn = 'idle';
      changed();
      return; // shown by the banner; wake() or a new machine tries again
    }
    scheduleRetry();
    return;
  }
  if (opening !== gen || state.machineId !== mid) return;
  opening = 0;
  const sock = ch.openEvents(helloSubscriptions());
  ws = sock;
  sock.onopen = () => {
    lastMessageAt = Date.now();
  };
  handle(sock);
}

function handle(sock: Sock) {
  sock.onmessage = (ev: { data: unknown }) => {
    if (ws !== sock) return;
    lastMessageAt = Date.now();
    if (state.resyncing) {
      state.resyncing = false;
      changed();
    }
    let m: StreamEvent;
    try {
      m = JSON.parse(ev.data as string);
    } catch {
      return;
    }
    onMessage(m);
  };
  sock.onclose = (ev: { code: number }) => {
    if (ws !== sock) return;
    ws = undefined;
    clearInterval(pingTimer);
    failWaiting();
    if (ev.code === 4401 && !paired(state.machineId)) {
      void logout('Your token was refused: log in again');
      return;
    }
    scheduleRetry();
  };
}

/** Rejects every client message still waiting for its ack: the stream it went on is gone. */
function failWaiting() {
  for (const [, w] of waiting) {
    clearTimeout(w.timer);
    w.reject(new Error('The connection closed'));
  }
  waiting.clear();
}

function scheduleRetry() {
  if (!canConnect()) return;
  state.conn = 'retrying';
  changed();
  const delay = reconnectDelay(attempt, retryHintMs);
  retryHintMs = undefined;
  attempt++;
  clearTimeout(retryTimer);
  retryTimer = setTimeout(connect, delay);
}

/** The longest wait between two reconnections of the event stream (before jitter). */
export const RECONNECT_MAX_MS = 5000;

/**
 * How long to wait before the attempt-th reconnection: the server's hint when its last error
 * gave one (retryAfterMs: the relay's machine is moving between replicas), else 100 ms doubling
 * to 5 s, jittered ±25 % (a relay replica that dies sends its sockets to another at once: a
 * person expects the conversation back within a second, as the CLI's 50 ms does; and a machine
 * that was away, its agent restarting, within seconds of its return, as the CLI's 2 s: with 30 s
 * the chaos soak saw a paired phone back 11.6 s after its machine).
 */
export function reconnectDelay(attempt: number, hintMs: number | undefined, rand = Math.random): number {
  if (typeof hintMs === 'number' && hintMs >= 0) return Math.min(hintMs, 30000);
  return Math.min(RECONNECT_MAX_MS, 100 * 2 ** Math.min(attempt, 6)) * (0.75 + rand() * 0.5);
}

export function disconnect() {
  clearTimeout(retryTimer);
  clearInterval(pingTimer);
  opening = 0;
  const s = ws;
  ws = undefined;
  s?.close(1000);
  attempt = 0;
  state.conn = 'idle';
}

/** How long a woken socket may stay silent after a ping before it is taken for dead. */
const PROBE_MS = 1500;
/** A socket silent for longer than this (the app pings every 25 s) is checked. */
const HEARTBEAT_MS = 35000;
/** The watchdog's period; a tick that comes much later means the page was frozen or asleep. */
const WATCH_MS = 2000;
/** How long a subscription may go unanswered (no replay_done) before it is asked for again. */
const REASK_MS = 6000;

/**
 * On phone wake, a resumed (frozen) page, a page back from the bfcache or the network's return:
 * reconnect now, or check that the open socket still lives (a ping answered within PROBE_MS,
 * else a new socket that resubscribes after each conversation's last seq), and catch the watched
 * conversations up by sequence over REST meanwhile. Every item goes through streamItem's seq
 * check, so what arrives twice (socket and REST) is shown once, in order.
 */
export function wake() {
  if (!canConnect()) return;
  state.resyncing = true;
  changed();
  if (wentOffline && state.online) {
    // The network went away since: whatever socket or channel is open or opening dates from
    // before, and may never answer again. Start afresh at once rather than after a probe.
    wentOffline = false;
    dropStream();
  }
  if (!ws) {
    attempt = 0;
    clearTimeout(retryTimer);
    if (opening) dropStream(); // a connect begun offline may hang until its handshake times out
    connect();
    return;
  }
  if (ws.readyState !== OPEN) return;
  void catchUpWanted();
  void flushOutbox();
  const sock = ws;
  const before = lastMessageAt;
  sock.send(JSON.stringify({ type: 'ping' }));
  setTimeout(() => {
    if (ws === sock && lastMessageAt === before) {
      // Half-open after a sleep: drop it (and its channel) and reconnect at once.
      dropStream();
      attempt = 0;
      connect();
    }
  }, PROBE_MS);
}

/**
 * What a failed browser test reports of the app's stream (web/e2e's harness reads it through
 * globalThis.betcodeStreamState): the connection, the socket, and each watched conversation's
 * sequence and replay. No message text, no token.
 */
export function streamState() {
  const now = Date.now();
  return {
    conn: state.conn, online: state.online, socket: ws ? ws.readyState : 'none', opening: !!opening,
    silentMs: lastMessageAt ? now - lastMessageAt : -1, outbox: outbox.length, inFlight: inFlight.size,
    convs: [...state.convs.values()].filter((c) => c.want || c.ended).map((c) => ({
      id: c.sessionId, lastSeq: c.lastSeq, replayed: c.replayed, askedSeq: c.askedSeq,
      askedMsAgo: c.askedAt ? now - c.askedAt : -1, ended: c.ended || '',
    })),
  };
}

/** Forgets the event socket and the current machine's channel (open or opening), for a fresh start. */
function dropStream() {
  const sock = ws;
  ws = undefined;
  opening = 0;
  clearInterval(pingTimer);
  failWaiting();
  sock?.close();
  const e = channels.get(state.machineId);
  if (e) {
    channels.delete(state.machineId);
    e.ch?.close();
  }
}

/** Catches every watched conversation up by sequence over REST (at most 3 s per call). */
async function catchUpWanted() {
  const mid = state.machineId;
  for (const c of [...state.convs.values()]) {
    if (!c.want || state.machineId !== mid) continue;
    const ac = new AbortController();
    const t = setTimeout(() => ac.abort(), 3000);
    try {
      const evs = await get<StreamEvent[]>(`/sessions/${encodeURIComponent(c.sessionId)}/events?after=${c.lastSeq}&limit=1000`, { signal: ac.signal });
      if (state.machineId !== mid) return;
      for (const e of evs || []) streamItem({ ...e, sessionId: c.sessionId });
    } catch {
      // The socket catches up instead.
    } finally {
      clearTimeout(t);
    }
  }
}

let watching = false;
let lastTick = 0;
let wentOffline = false;

/** Wakes on the Page Lifecycle's resume, a bfcache restore, a silent socket and a frozen timer. */
function watchLifecycle() {
  if (watching) return;
  watching = true;
  document.addEventListener('resume', () => wake());
  document.addEventListener('freeze', () => saveConvs());
  addEventListener('offline', () => (wentOffline = true));
  addEventListener('pageshow', (e) => {
    if ((e as PageTransitionEvent).persisted) wake();
  });
  lastTick = Date.now();
  setInterval(() => {
    const now = Date.now();
    const gap = now - lastTick;
    lastTick = now;
    if (document.visibilityState !== 'visible') return;
    reaskSilentSubscriptions(now);
    if (gap > 3 * WATCH_MS) wake(); // the timers stood still: frozen, or the device slept
    else if (ws?.readyState === OPEN && state.conn === 'open' && now - lastMessageAt > HEARTBEAT_MS) wake();
    else if (outbox.length && state.conn === 'open' && state.online && now - lastFlush > 10000) void flushOutbox();
    else if (outbox.length && state.conn === 'idle' && !ws && !opening && state.online && canConnect() && now - lastFlush > 10000) {
      // Given up on (the machine refused or did not answer): messages wait, so try again now and then.
      lastFlush = now;
      attempt = 0;
      connect();
    }
  }, WATCH_MS);
}

function startPing() {
  clearInterval(pingTimer);
  pingTimer = setInterval(() => {
    if (ws?.readyState === OPEN) {
      if (Date.now() - lastMessageAt > 60000) {
        wake();
        return;
      }
      ws.send(JSON.stringify({ type: 'ping' }));
    }
  }, 25000);
}

/** Sends a client message with an id; resolves on its ack, rejects on its error. */
export function wsSend(msg: Record<string, unknown>): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!ws || ws.readyState !== OPEN || state.conn !== 'open') {
      reject(new Error('Not connected'));
      return;
    }
    const id = newKey();
    const timer = setTimeout(() => {
      waiting.delete(id);
      reject(new Error('No answer from the server'));
    }, 20000);
    waiting.set(id, { resolve, reject, timer });
    ws.send(JSON.stringify({ ...msg, id }));
  });
}

function sendRaw(msg: Record<string, unknown>) {
  if (ws?.readyState === OPEN && state.conn === 'open') ws.send(JSON.stringify(msg));
}

function onMessage(m: StreamEvent) {
  switch (m.type) {
    case 'snapshot': {
      attempt = 0;
      retryHintMs = undefined;
      state.conn = 'open';
      startPing();
      const fresh = new Map<string, Session>();
      for (const s of (m.sessions as Session[]) || []) fresh.set(s.id, s);
      state.sessions = fresh;
      state.sessionsLoaded = true;
      state.rules = (m.permissionRules as PermissionRule[]) || [];
      if (m.machine) state.machine = m.machine as Machine;
      // The snapshot's pending lists are the truth now: a prompt answered elsewhere while the
      // socket was down is no longer open.
      for (const c of state.convs.values()) {
        for (const it of c.items) {
          if ((it.k === 'perm' || it.k === 'question') && it.live) {
            it.live = false;
            it.v++;
          }
        }
      }
      // (Un)subscriptions asked for between the hello and now.
      for (const c of state.convs.values()) {
        if (c.want && !helloSubs.has(c.sessionId)) askSubscribe(c);
        if (!c.want && helloSubs.has(c.sessionId)) sendRaw({ type: 'unsubscribe', sessionId: c.sessionId });
      }
      changed();
      void flushOutbox();
      return;
    }
    case 'session_created':
    case 'session_updated':
      putSession(m.session as Session);
      return;
    case 'session_status': {
      const s = state.sessions.get(m.sessionId!);
      if (s) putSession({ ...s, status: m.status as Session['status'], agentStatus: m.agentStatus as Session['agentStatus'] });
      return;
    }
    case 'session_deleted':
      forgetSession(m.sessionId!);
      return;
    case 'cost_update': {
      const s = state.sessions.get(m.sessionId!);
      if (s) putSession({ ...s, costUsd: m.costUsd as number, inputTokens: m.inputTokens as number, outputTokens: m.outputTokens as number });
      return;
    }
    case 'permission_resolved': {
      const c = state.convs.get(m.sessionId!);
      if (c) {
        c.resolved.add(m.requestId as string);
        touchPrompt(c, m.requestId as string);
      }
      const s = state.sessions.get(m.sessionId!);
      if (s?.pending) s.pending = s.pending.filter((p) => p.requestId !== m.requestId && p.questionId !== m.requestId);
      changed();
      return;
    }
    case 'permission_rules_updated':
      state.rules = (m.rules as PermissionRule[]) || [];
      changed();
      return;
    case 'ack':
    case 'pong':
    case 'error':
      if (m.id && waiting.has(m.id)) {
        const w = waiting.get(m.id)!;
        waiting.delete(m.id);
        clearTimeout(w.timer);
        if (m.type === 'error') w.reject(new ApiError(0, (m.code as string) || 'ERROR', (m.message as string) || 'Refused'));
        else w.resolve();
        return;
      }
      if (m.type === 'error') {
        if (m.seq && m.sessionId) break; // a session's error event: rendered below
        if (m.code === 'UNAUTHENTICATED') return; // the close (4401) follows
        // The relay's hint (the machine is moving between its replicas): the close follows,
        // and the next connection is tried when it says.
        if (typeof m.retryAfterMs === 'number') retryHintMs = m.retryAfterMs;
        toast((m.message as string) || 'The server refused a message');
        return;
      }
      return;
    case 'replay_done': {
      const c = state.convs.get(m.sessionId!);
      if (c) {
        c.replayed = true;
        c.resubTries = 0;
        c.v++;
        changed();
      }
      return;
    }
    case 'subscription_ended': {
      const c = state.convs.get(m.sessionId!);
      if (c && c.want) {
        // A machine moving between relay replicas, or a stream cut for falling behind: subscribe
        // again from the last seq, after what the server asks or a short backoff.
        const delay = resubscribeDelay(m.code as string, m.retryAfterMs as number | undefined, c.resubTries || 0);
        if (delay !== undefined) {
          c.resubTries = (c.resubTries || 0) + 1;
          c.replayed = false;
          clearTimeout(resubTimers.get(c.sessionId));
          resubTimers.set(c.sessionId, setTimeout(() => {
            resubTimers.delete(c.sessionId);
            if (c.want && !c.ended) askSubscribe(c);
          }, delay));
          return;
        }
      }
      if (c) {
        c.want = false;
        c.ended = (m.message as string) || 'The server stopped streaming this session';
        c.v++;
        changed();
      }
      return;
    }
  }
  if (m.sessionId) streamItem(m);
}

// ---------------------------------------------------------------- conversations

const convKey = (sid: string) => `betcode.conv.${state.machineId}.${sid}`;

function newConv(sessionId: string): Conv {
  return {
    sessionId, items: [], lastSeq: 0, replayed: false, want: false, tasks: [], resolved: new Set(), answered: new Map(),
    already: new Set(), sending: new Set(), v: 0,
  };
}

/** The conversation of a session, restored from sessionStorage after a reload. */
export function conv(sid: string): Conv {
  let c = state.convs.get(sid);
  if (c) return c;
  c = newConv(sid);
  try {
    const raw = sessionStorage.getItem(convKey(sid));
    if (raw) {
      const d = JSON.parse(raw);
      c.items = (d.items || []).map(upgradeItem);
      c.lastSeq = d.lastSeq || 0;
      c.tasks = d.tasks || [];
      c.resolved = new Set(d.resolved || []);
      c.answered = new Map(d.answered || []);
      c.already = new Set(d.already || []);
      c.model = d.model;
      c.contextPct = d.contextPct;
    }
  } catch {
    c = newConv(sid);
  }
  state.convs.set(sid, c);
  return c;
}

/** An item saved by an older version of the app: a question item held one question. */
function upgradeItem(it: Item): Item {
  if (it.k === 'question' && !Array.isArray(it.questions)) {
    const o = it as unknown as { question?: string; options?: unknown; multiSelect?: boolean };
    const questions: Ask[] = [];
    addAsk(questions, o);
    return { k: 'question', key: it.key, v: it.v, questionId: it.questionId, questions, live: it.live };
  }
  return it;
}

const dirtyConvs = new Set<string>();
let saveTimer: ReturnType<typeof setTimeout> | undefined;

function scheduleSave(c: Conv) {
  dirtyConvs.add(c.sessionId);
  if (!saveTimer) saveTimer = setTimeout(saveConvs, 2000);
}

/** Writes dirty conversations to sessionStorage: items and the seq they end at, together. */
export function saveConvs() {
  clearTimeout(saveTimer);
  saveTimer = undefined;
  for (const sid of dirtyConvs) {
    const c = state.convs.get(sid);
    if (!c) continue;
    const d = {
      items: c.items, lastSeq: c.lastSeq, tasks: c.tasks, model: c.model, contextPct: c.contextPct,
      resolved: [...c.resolved], answered: [...c.answered], already: [...c.already],
    };
    try {
      sessionStorage.setItem(convKey(sid), JSON.stringify(d));
    } catch {
      // Too big for sessionStorage: forget it, a reload replays the session from the start.
      try {
        sessionStorage.removeItem(convKey(sid));
      } catch {
        /* ignore */
      }
    }
  }
  dirtyConvs.clear();
}

export function subscribe(sid: string) {
  const c = conv(sid);
  c.ended = undefined;
  c.resubTries = 0;
  if (c.want && state.conn === 'open') return;
  c.want = true;
  c.replayed = false;
  askSubscribe(c);
  changed();
}

/** The timers of subscriptions to ask again after a transient subscription_ended, by session. */
const resubTimers = new Map<string, ReturnType<typeof setTimeout>>();

/** subscription_ended codes that a later try mends: the machine moving or briefly away, a relay replica going, a stream cut for falling behind. */
const TRANSIENT_ENDS = new Set(['UNAVAILABLE', 'MACHINE_OFFLINE', 'TUNNEL_DISCONNECTED', 'RELAY_DRAINING', 'SLOW_CONSUMER', 'DEADLINE_EXCEEDED']);

/** How many transient ends in a row are tried again (about 30 s in all) before the conversation shows the end and a Resubscribe button. */
export const RESUBSCRIBE_TRIES = 8;

/**
 * How long to wait before subscribing again after a subscription_ended with code, the tries-th
 * in a row: what the server asks (retryAfterMs: the relay's "the machine is moving, try in 100
 * ms"), else 250 ms doubling to 8 s, jittered; undefined when the end is final (the session was
 * deleted, access lost) or the tries are spent.
 */
export function resubscribeDelay(code: string | undefined, retryAfterMs: number | undefined, tries: number, rand = Math.random): number | undefined {
  if (!code || !TRANSIENT_ENDS.has(code) || tries >= RESUBSCRIBE_TRIES) return undefined;
  if (typeof retryAfterMs === 'number' && retryAfterMs >= 0) return Math.min(retryAfterMs, 30000);
  return Math.min(8000, 250 * 2 ** tries) * (0.75 + rand() * 0.5);
}

/** Sends c's subscription (a no-op until the stream is open: the hello carries it then). */
function askSubscribe(c: Conv) {
  c.askedAt = Date.now();
  c.askedSeq = c.lastSeq;
  sendRaw({ type: 'subscribe', sessionId: c.sessionId, afterSequence: c.lastSeq });
}

/**
 * A subscription the stream has not begun to answer (no replay_done) REASK_MS after it was
 * asked for is asked again: a subscription lost on the way must not leave a conversation silent
 * while the socket looks live. Asking twice is harmless: the server restarts the stream from the
 * last seq, and streamItem drops what is already shown.
 */
function reaskSilentSubscriptions(now: number) {
  if (ws?.readyState !== OPEN || state.conn !== 'open') return;
  for (const c of state.convs.values()) {
    if (!c.want || c.replayed || c.ended || !c.askedAt) continue;
    if (c.lastSeq !== c.askedSeq) {
      // The replay is under way (events came, replay_done not yet): answered, not silent.
      c.askedAt = now;
      c.askedSeq = c.lastSeq;
      continue;
    }
    if (now - c.askedAt < REASK_MS) continue;
    console.warn(`BetCode: no replay of session ${c.sessionId} ${now - c.askedAt} ms after subscribing; subscribing again`);
    askSubscribe(c);
  }
}

/**
 * Catches a conversation up over REST (GET /api/sessions/{id}/events) while the WebSocket is not
 * open, so history shows even when the socket cannot connect. Items go through the same seq
 * check as the stream's, so mixing both never duplicates.
 */
export async function catchUpRest(sid: string) {
  const c = conv(sid);
  for (let page = 0; page < 50 && state.conn !== 'open'; page++) {
    const evs = await get<StreamEvent[]>(`/sessions/${encodeURIComponent(sid)}/events?after=${c.lastSeq}&limit=1000`);
    for (const e of evs || []) streamItem({ ...e, sessionId: sid });
    if (!evs || evs.length < 1000) break;
  }
}

export function unsubscribe(sid: string) {
  const c = state.convs.get(sid);
  if (!c || !c.want) return;
  c.want = false;
  sendRaw({ type: 'unsubscribe', sessionId: sid });
}

/**
 * Where the stream's items go: before the trailing echoes of this client's messages that the
 * stream has not shown yet (still in the outbox, or taken by the machine but not yet replayed:
 * after a reconnect the rest of the turn that was streaming comes first, and must not end up
 * below the message written meanwhile).
 */
function tailAt(c: Conv): number {
  let i = c.items.length;
  while (i > 0) {
    const it = c.items[i - 1];
    if (it.k !== 'user' || !(it.queued || it.local)) break;
    i--;
  }
  return i;
}

function push(c: Conv, it: Item) {
  if (it.k === 'user' && (it.queued || it.local)) {
    c.items.push(it);
    return;
  }
  const at = tailAt(c);
  if (at === c.items.length) c.items.push(it);
  else c.items.splice(at, 0, it);
}

function lastText(c: Conv): TextItem | undefined {
  const it = c.items[tailAt(c) - 1];
  return it && it.k === 'text' && !it.done ? it : undefined;
}

function touchPrompt(c: Conv, id: string) {
  for (const it of c.items) {
    if ((it.k === 'perm' && it.requestId === id) || (it.k === 'question' && it.questionId === id)) it.v++;
  }
  c.v++;
}

/** Called with every streamed item a conversation took (src/team.ts re-reads the team on some). */
export const streamHooks = new Set<(m: StreamEvent) => void>();

const str = (x: unknown) => (typeof x === 'string' ? x : x == null ? '' : JSON.stringify(x, null, 2));
const obj = (x: unknown) => (x && typeof x === 'object' ? (x as Record<string, unknown>) : {});

function streamItem(m: StreamEvent) {
  const c = state.convs.get(m.sessionId!);
  if (!c) return;
  const seq = typeof m.seq === 'number' ? m.seq : 0;
  if (seq > 0) {
    if (seq <= c.lastSeq) return; // already rendered: no duplicate after a reconnect or reload
    c.lastSeq = seq;
  }
  const key = String(seq || 'x' + c.items.length);
  const live = c.replayed;
  switch (m.type) {
    case 'lead_output': {
      let t = lastText(c);
      if (!t) {
        t = { k: 'text', key, v: 0, text: '', done: false };
        push(c, t);
      }
      t.text += str(m.text);
      if (m.complete) t.done = true;
      t.v++;
      break;
    }
    case 'user_message':
    case 'user': {
      const text = str(m.text ?? m.prompt);
      const echo = c.items.find((i): i is UserItem => i.k === 'user' && !!i.local && (i.sent ?? i.text) === text);
      if (echo) {
        echo.local = false;
        echo.queued = false;
        echo.v++;
      } else push(c, { k: 'user', key, v: 0, text });
      break;
    }
    case 'tool_call': {
      endText(c);
      push(c, {
        k: 'tool', key, v: 0, toolId: str(m.toolId), toolName: str(m.toolName), input: obj(m.input),
        description: str(m.description), done: false,
      });
      break;
    }
    case 'tool_result': {
      const t = [...c.items].reverse().find((i): i is ToolItem => i.k === 'tool' && i.toolId === m.toolId);
      if (t) {
        t.done = true;
        t.output = str(m.output);
        t.isError = !!m.isError;
        t.durationMs = m.durationMs as number;
        t.v++;
      }
      break;
    }
    case 'permission_request':
      endText(c);
      push(c, {
        k: 'perm', key, v: 0, requestId: str(m.requestId), toolName: str(m.toolName), input: obj(m.input),
        description: str(m.description), live,
      });
      break;
    case 'question':
      endText(c);
      groupQuestion(c.items, m, key, live);
      break;
    case 'task_sync':
      c.tasks = (m.tasks as Task[]) || [];
      break;
    case 'agent_status':
      c.agentStatus = str(m.status);
      c.statusMessage = str(m.message);
      break;
    case 'session_info':
      c.model = str(m.model) || c.model;
      if (typeof m.contextUsagePercent === 'number') c.contextPct = m.contextUsagePercent;
      break;
    case 'usage': {
      const cost = typeof m.costUsd === 'number' ? `$${m.costUsd.toFixed(4)}` : '';
      const parts = [cost, `${fmtTokens(m.inputTokens)} in`, `${fmtTokens(m.outputTokens)} out`];
      if (typeof m.durationMs === 'number') parts.push(`${(m.durationMs / 1000).toFixed(1)} s`);
      push(c, { k: 'note', key, v: 0, kind: 'usage', text: parts.filter(Boolean).join(' · ') });
      break;
    }
    case 'plan_mode':
      c.planMode = !!m.active;
      if (m.plan) push(c, { k: 'note', key, v: 0, kind: 'plan', text: str(m.plan) });
      else push(c, { k: 'note', key, v: 0, kind: 'info', text: m.active ? 'Plan mode on' : 'Plan mode off' });
      break;
    case 'turn_complete':
      endText(c);
      push(c, { k: 'note', key, v: 0, kind: 'turn', text: m.stopReason ? `Turn complete (${str(m.stopReason)})` : 'Turn complete' });
      break;
    case 'error':
      endText(c);
      push(c, { k: 'note', key, v: 0, kind: 'error', text: `${str(m.message)}${m.code ? ` (${str(m.code)})` : ''}` });
      break;
    default:
      return;
  }
  c.v++;
  scheduleSave(c);
  changed();
  streamHooks.forEach((f) => f(m));
}

/**
 * Adds a question event to the card of its questionId (one AskUserQuestion call sends one event
 * per question, all with one id), or starts that card.
 */
export function groupQuestion(items: Item[], m: StreamEvent, key: string, live: boolean) {
  const questionId = str(m.questionId);
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if (it.k === 'question' && it.questionId === questionId) {
      if (addAsk(it.questions, m)) it.v++;
      if (live && !it.live) {
        it.live = true;
        it.v++;
      }
      return;
    }
  }
  const questions: Ask[] = [];
  addAsk(questions, m);
  items.push({ k: 'question', key, v: 0, questionId, questions, live });
}

function endText(c: Conv) {
  const t = lastText(c);
  if (t) {
    t.done = true;
    t.v++;
  }
}

export function fmtTokens(n: unknown): string {
  const x = typeof n === 'number' ? n : 0;
  return x >= 1e6 ? (x / 1e6).toFixed(1) + 'M' : x >= 1e3 ? (x / 1e3).toFixed(1) + 'k' : String(x);
}

/** Whether a permission request or question still waits for an answer. */
export function isOpen(c: Conv, id: string, live: boolean): boolean {
  if (c.resolved.has(id) || c.answered.has(id)) return false;
  if (live) return true;
  const s = state.sessions.get(c.sessionId);
  return !!s?.pending?.some((p) => p.requestId === id || p.questionId === id);
}

// ---------------------------------------------------------------- actions

async function viaWsOrRest(msg: Record<string, unknown>, rest: () => Promise<unknown>) {
  if (state.conn === 'open') {
    try {
      await wsSend(msg);
      return;
    } catch (e) {
      if (e instanceof ApiError) throw e; // the server refused it: don't send twice
    }
  }
  await rest();
}

export async function answerPermission(sid: string, requestId: string, behavior: 'allow' | 'allowSession' | 'deny', message?: string) {
  const c = conv(sid);
  c.answered.set(requestId, behavior);
  touchPrompt(c, requestId);
  changed();
  closePromptNotification(sid, requestId);
  const body: Record<string, unknown> = { behavior };
  if (message) body.message = message;
  try {
    await viaWsOrRest({ type: 'permission_response', sessionId: sid, requestId, ...body }, () =>
      post(`/sessions/${encodeURIComponent(sid)}/permissions/${encodeURIComponent(requestId)}`, body),
    );
  } catch (e) {
    if ((e as ApiError).code === 'PERMISSION_NOT_PENDING' || (e as ApiError).status === 409) {
      c.resolved.add(requestId);
      toast('That request was already answered or timed out');
    } else {
      c.answered.delete(requestId);
      toast('Could not answer: ' + errText(e));
    }
    touchPrompt(c, requestId);
    changed();
  }
  scheduleSave(c);
}

/**
 * Answers one AskUserQuestion call: answers maps every question's text to its answer, all in
 * ONE question_response (the agent settles the request on the first one). The card shows the
 * answers once the server acked them; a 409 (PERMISSION_NOT_PENDING) shows "already answered".
 */
export async function answerQuestion(sid: string, questionId: string, answers: Record<string, string>) {
  const c = conv(sid);
  if (c.sending.has(questionId)) return;
  c.sending.add(questionId);
  touchPrompt(c, questionId);
  changed();
  closePromptNotification(sid, questionId);
  try {
    await viaWsOrRest({ type: 'question_response', sessionId: sid, questionId, answers }, () =>
      post(`/sessions/${encodeURIComponent(sid)}/questions/${encodeURIComponent(questionId)}`, { answers }),
    );
    c.answered.set(questionId, JSON.stringify(answers));
  } catch (e) {
    if ((e as ApiError).code === 'PERMISSION_NOT_PENDING' || (e as ApiError).status === 409) {
      c.resolved.add(questionId);
      c.already.add(questionId);
      toast('That question was already answered or timed out');
    } else {
      toast('Could not answer: ' + errText(e));
    }
  } finally {
    c.sending.delete(questionId);
    touchPrompt(c, questionId);
    changed();
  }
  scheduleSave(c);
}

/**
 * Sends a user message through the outbox: it is stored (IndexedDB) with a client-made key, then
 * sent; a message the network or the machine could not take stays queued and is sent again, with
 * the same key, when the stream is back (the agent takes a key once: QueueMessage's
 * idempotency_key, kept in its session log, so a send that was in flight when the network dropped
 * is not taken twice). Rejects only when the machine refused it (the echo is taken back).
 */
export async function sendMessage(sid: string, text: string, files: FileAttachment[]) {
  const o: Outgoing = { key: newKey(), machineId: state.machineId, sessionId: sid, text, at: Date.now() };
  if (files.length) o.files = files;
  // Shown at once, below what streams until the machine took it; taken back if it refuses it.
  const echo = echoUser(sid, text + (files.length ? `\n[${files.length} image${files.length > 1 ? 's' : ''}]` : ''), true, text);
  if (echo) o.echo = echo.key;
  outbox.push(o);
  await saveOutbox();
  try {
    await deliver(o);
  } catch (e) {
    const c = conv(sid);
    c.items = c.items.filter((i) => i !== echo);
    c.v++;
    scheduleSave(c);
    changed();
    throw e;
  }
}

/** A message in the outbox: key is the idempotency key every attempt sends; echo, its echo item's key. */
export interface Outgoing { key: string; machineId: string; sessionId: string; text: string; files?: FileAttachment[]; at: number; echo?: string }

let outbox: Outgoing[] = [];
const inFlight = new Set<string>();
let lastFlush = 0;

function saveOutbox(): Promise<void> {
  state.outbox = outbox.length;
  changed();
  return idbSet('outbox', outbox).catch(() => {
    /* no IndexedDB: the outbox lives until the tab closes */
  });
}

/**
 * POSTs body to path on paired machine mid through its own channel (not the current machine's,
 * which api's calls take); an answer over 299 rejects as an ApiError, a channel that cannot be
 * opened with its own error.
 */
export async function postVia(mid: string, path: string, body: unknown): Promise<void> {
  const a = await (await channelFor(mid)).request('POST', path, JSON.stringify(body));
  if (a.status <= 299) return;
  let d: { error?: string; code?: string } = {};
  try {
    d = JSON.parse(a.body);
  } catch {
    /* not JSON */
  }
  throw new ApiError(a.status, d.code || 'HTTP_' + a.status, d.error || 'Refused');
}

/** Codes of a call (status 0) that did not reach the machine, or that it could not take yet: try again later. */
const AWAY = new Set([
  'NETWORK', 'UNAVAILABLE', 'CLOSED', 'DEADLINE_EXCEEDED', 'TIMEOUT', 'NO_ANSWER', 'RESOURCE_EXHAUSTED',
  'MACHINE_OFFLINE', 'TUNNEL_DISCONNECTED',
]);

/** Whether a failed send may succeed later: the network, the channel or the machine was away. */
function transient(e: unknown): boolean {
  if (!(e instanceof ApiError)) return true; // not connected, the socket closed, no answer
  if (e.status === 429 || e.status === 502 || e.status === 503 || e.status === 504) return true;
  return e.status === 0 && (AWAY.has(e.code) || /_(OFFLINE|DISCONNECTED|UNAVAILABLE)$/.test(e.code));
}

/**
 * Sends o once; true when its machine took it (then it leaves the outbox), false when it stays
 * queued; rejects (and drops it) when the machine refused it.
 */
async function deliver(o: Outgoing): Promise<boolean> {
  if (inFlight.has(o.key) || !state.online) return false;
  if (o.machineId !== state.machineId && !paired(o.machineId)) return false;
  inFlight.add(o.key);
  try {
    const body = { prompt: o.text, files: o.files, idempotencyKey: o.key };
    const path = `/sessions/${encodeURIComponent(o.sessionId)}/messages`;
    if (o.machineId === state.machineId) {
      await viaWsOrRest({ type: 'user_message', sessionId: o.sessionId, text: o.text, files: o.files, idempotencyKey: o.key }, () => post(path, body));
    } else {
      await postVia(o.machineId, path, body);
    }
  } catch (e) {
    if (transient(e)) return false;
    outbox = outbox.filter((x) => x.key !== o.key);
    await saveOutbox();
    throw e;
  } finally {
    inFlight.delete(o.key);
  }
  outbox = outbox.filter((x) => x.key !== o.key);
  taken(o);
  await saveOutbox();
  return true;
}

/** The machine took o: its echo is no longer shown as queued (it keeps below the stream until the stream shows it). */
function taken(o: Outgoing) {
  const c = o.machineId === state.machineId ? state.convs.get(o.sessionId) : undefined;
  const it = c?.items.find((i): i is UserItem => i.k === 'user' && i.key === o.echo);
  if (!c || !it || !it.queued) return;
  it.queued = false;
  it.v++;
  c.v++;
  scheduleSave(c);
}

/** Sends the queued messages in order; stops at the first that must wait. */
export async function flushOutbox() {
  lastFlush = Date.now();
  for (const o of [...outbox]) {
    try {
      if (!(await deliver(o))) {
        if (o.machineId === state.machineId) return; // keep the order of one machine's messages
      }
    } catch (e) {
      toast('A queued message was refused: ' + errText(e));
    }
  }
}

/** Shows what the user sent: the event stream carries no user message of its own. */
export function echoUser(sid: string, text: string, queued = false, sent?: string): Item | undefined {
  if (!text.trim()) return;
  const c = conv(sid);
  const it: UserItem = { k: 'user', key: 'local-' + newKey(), v: 0, text, local: true, queued };
  if (sent !== undefined && sent !== text) it.sent = sent;
  push(c, it);
  c.v++;
  scheduleSave(c);
  changed();
  return it;
}

export async function cancelTurn(sid: string) {
  await viaWsOrRest({ type: 'cancel', sessionId: sid }, () => post(`/sessions/${encodeURIComponent(sid)}/stop`));
}

export function isBusy(sid: string): boolean {
  const s = state.sessions.get(sid);
  const c = state.convs.get(sid);
  const st = c?.agentStatus || s?.agentStatus;
  return (
    (!!s && (s.status === 'starting' || s.status === 'running' || s.status === 'waiting')) ||
    st === 'thinking' || st === 'executing_tool' || st === 'waiting_for_user' || st === 'compacting'
  );
}
