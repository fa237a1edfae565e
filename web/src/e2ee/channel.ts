// Channels and pairing over the relay's WebSockets (docs/e2ee-wire.md §1, §2): a Carrier moves
// whole Noise messages; dial runs Noise_IK as Go's e2ee.Dial and then speaks the web/1 frames;
// pairOver runs Noise_XXpsk3 as Go's e2ee.PairDevice and agent/client.Pair.
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { base64, fingerprint, matchesFingerprint, parsePairingCode, shareCodeUser, unbase64, validatePairingCode, type PairingCode } from './code';
import { CipherState, HandshakeState, IK, MAX_MSG, TAGLEN, XXpsk3 } from './noise';
import { staticKey } from './static';
import { ChannelError, type Answer, type ChannelOptions, type EventSocket, type PairOptions, type Pairing, type WebChannel } from './types';

export const OPEN_PROLOGUE = 'betcode e2ee v1 open\x00';
export const PAIR_PROLOGUE = 'betcode e2ee v1 pair\x00';
const PSK_SALT = 'betcode pairing v1';
export const MAX_HELLO = 4096;
export const MAX_REASON = 1024;
/** The most plaintext one transport message carries. */
export const MAX_PAYLOAD = MAX_MSG - TAGLEN;
/** The largest web/1 frame. */
export const MAX_FRAME = 4 << 20;
/** The relay refuses bigger WebSocket messages. */
const MAX_WS_MESSAGE = 70000;

const utf8 = new TextEncoder();
const fromUtf8 = (b: Uint8Array) => new TextDecoder().decode(b);

// ---------------------------------------------------------------- carriers

/** A message-preserving pipe: one Noise message per message. */
export interface Carrier {
  send(msg: Uint8Array): void;
  /** The next message; undefined once the carrier ended normally; rejects with a ChannelError else. */
  recv(): Promise<Uint8Array | undefined>;
  close(): void;
}

/** The ChannelError of a WebSocket close (§1), or undefined for a normal closure. */
export function closeError(code: number, reason: string): ChannelError | undefined {
  if (code === 1000) return undefined;
  if (code >= 4000 && code < 5000) {
    const m = /^([A-Za-z][A-Za-z0-9_]*): ?([\s\S]*)$/.exec(reason); // "<BETCODE_CODE>: …" or "<GrpcCode>: …"
    if (m) return new ChannelError(m[1], m[2] || m[1], code);
    return new ChannelError(`HTTP_${code - 4000}`, reason || `the relay ended the connection (${code})`, code);
  }
  if (code === 1009) return new ChannelError('TOO_LARGE', 'a message was over the relay\'s limit', code);
  return new ChannelError('UNAVAILABLE', `the connection to the relay was lost (WebSocket close ${code}${reason ? ': ' + reason : ''})`, code);
}

/** A queue of received messages and their end, for carriers. */
export class Inbox {
  private q: Uint8Array[] = [];
  private waiters: { resolve: (m: Uint8Array | undefined) => void; reject: (e: ChannelError) => void }[] = [];
  ended = false;
  err: ChannelError | undefined;

  push(m: Uint8Array): void {
    if (this.ended) return;
    const w = this.waiters.shift();
    if (w) w.resolve(m);
    else this.q.push(m);
  }
  end(err?: ChannelError): void {
    if (this.ended) return;
    this.ended = true;
    this.err = err;
    for (const w of this.waiters.splice(0)) (err ? w.reject(err) : w.resolve(undefined));
  }
  next(): Promise<Uint8Array | undefined> {
    const m = this.q.shift();
    if (m) return Promise.resolve(m);
    if (this.ended) return this.err ? Promise.reject(this.err) : Promise.resolve(undefined);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

/** The WebSocket constructor (a test may pass another with the same API). */
export type WebSocketCtor = new (url: string) => WebSocket;

export function defaultUrl(path: string): string {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path;
}

/** Opens a WebSocket carrier (§1): the hello with the credential and the machine, then binary messages. */
export function wsCarrier(url: string, token: string, machine: string, signal?: AbortSignal, WS: WebSocketCtor = WebSocket): Promise<Carrier> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortError());
      return;
    }
    const ws = new WS(url);
    ws.binaryType = 'arraybuffer';
    const inbox = new Inbox();
    let opened = false;
    const carrier: Carrier = {
      send(msg) {
        if (inbox.ended) throw inbox.err ?? new ChannelError('CLOSED', 'the channel is closed');
        if (msg.length > MAX_WS_MESSAGE) throw new ChannelError('TOO_LARGE', `a message of ${msg.length} bytes is over the relay's limit`);
        ws.send(msg);
      },
      recv: () => inbox.next(),
      close() {
        inbox.end(new ChannelError('CLOSED', 'the channel is closed'));
        try {
          ws.close(1000);
        } catch {
          /* already closing */
        }
      },
    };
    const onAbort = () => {
      carrier.close();
      if (!opened) reject(abortError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    ws.onopen = () => {
      opened = true;
      signal?.removeEventListener('abort', onAbort);
      ws.send(JSON.stringify({ type: 'hello', token, machine }));
      resolve(carrier);
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data === 'string') {
        inbox.end(new ChannelError('PROTOCOL', 'the relay sent a text message inside a channel'));
        ws.close(1000); // script may close with 1000 or 3000-4999 only
        return;
      }
      inbox.push(new Uint8Array(ev.data as ArrayBuffer));
    };
    ws.onclose = (ev: CloseEvent) => {
      signal?.removeEventListener('abort', onAbort);
      const err = closeError(ev.code, ev.reason);
      inbox.end(err);
      if (!opened) reject(err ?? new ChannelError('UNAVAILABLE', 'the relay closed the connection at once'));
    };
  });
}

function abortError(): Error {
  return new DOMException('The operation was aborted.', 'AbortError');
}

// ---------------------------------------------------------------- the channel (IK)

/** The hello of a browser's channel (§2). */
export function channelHello(name: string, version: string): Uint8Array {
  return utf8.encode(JSON.stringify({ name, version, protocol: 'web/1' }));
}

/** Decodes IK message 2's payload as Go's parseAnswer: undefined when admitted. */
export function parseAnswer(p: Uint8Array): ChannelError | undefined {
  if (p.length === 0) throw new ChannelError('PROTOCOL', 'the machine\'s answer is empty');
  if (p[0] === 0 && p.length === 1) return undefined;
  if (p[0] === 0) throw new ChannelError('PROTOCOL', `the machine's answer has ${p.length - 1} bytes after its status`);
  if (p[0] === 1 && p.length - 1 > MAX_REASON) {
    throw new ChannelError('PROTOCOL', `the machine's refusal reason is ${p.length - 1} bytes, over the limit of ${MAX_REASON}`);
  }
  if (p[0] === 1) return new ChannelError('REFUSED', 'the machine refused this device: ' + fromUtf8(p.subarray(1)));
  throw new ChannelError('PROTOCOL', `the machine's answer has status ${p[0]}, which this version does not know`);
}

const machineKeyBytes = (k: Uint8Array | string): Uint8Array => (typeof k === 'string' ? unbase64(k) : k);

/** openChannel of the API: a WebSocket to /api/channel, then dial. */
export async function openChannel(opts: ChannelOptions, WS?: WebSocketCtor): Promise<WebChannel> {
  checkChannelOptions(opts);
  const c = await wsCarrier(opts.wsUrl ?? defaultUrl('/api/channel'), opts.token, opts.machineId, opts.signal, WS);
  return dial(c, opts);
}

function checkChannelOptions(opts: ChannelOptions): void {
  if (!opts.machineId) throw new ChannelError('INVALID', 'no machine id');
  const k = machineKeyBytes(opts.machineKey);
  if (k.length !== 32) throw new ChannelError('INVALID', `the machine's key is ${k.length} bytes, not 32`);
}

/**
 * Runs Noise_IK over c as the device (Go's e2ee.Dial) and returns the web/1 channel. On any
 * failure it closes c. ephemeral fixes the ephemeral key (tests).
 */
export async function dial(c: Carrier, opts: ChannelOptions, ephemeral?: Uint8Array): Promise<WebChannel> {
  try {
    checkChannelOptions(opts);
    const hello = channelHello(opts.hello.name, opts.hello.version);
    if (hello.length > MAX_HELLO) throw new ChannelError('INVALID', `hello of ${hello.length} bytes is over the limit of ${MAX_HELLO}`);
    const hs = new HandshakeState({
      pattern: IK,
      initiator: true,
      prologue: utf8.encode(OPEN_PROLOGUE + opts.machineId),
      s: staticKey(opts.deviceKey),
      rs: machineKeyBytes(opts.machineKey),
      ephemeral,
    });
    const { message } = await hs.writeMessage(hello);
    c.send(message);
    const msg2 = await withAbort(c.recv(), opts.signal);
    if (!msg2) {
      throw new ChannelError('NO_ANSWER', 'the machine ended the channel without answering: this device\'s record of the machine\'s key or id may be stale (pair again)');
    }
    let r;
    try {
      r = await hs.readMessage(msg2);
    } catch {
      throw new ChannelError('HANDSHAKE', 'the machine\'s answer did not authenticate: it does not hold the key this device paired with, or the relay altered the exchange');
    }
    const refused = parseAnswer(r.payload);
    if (refused) throw refused;
    if (!r.done) throw new ChannelError('PROTOCOL', 'the handshake did not finish');
    return new Channel(c, r.done.send, r.done.recv);
  } catch (e) {
    c.close();
    throw e;
  }
}

/** How long a handshake waits for the peer's next message. */
export const HANDSHAKE_TIMEOUT = 30000;

/** p, or an AbortError when signal aborts, or a TIMEOUT ChannelError after HANDSHAKE_TIMEOUT. */
function withAbort<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) reject(abortError());
    const onAbort = () => reject(abortError());
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(
      () => reject(new ChannelError('TIMEOUT', 'the machine did not answer in time: is it running and connected to its relay?')),
      HANDSHAKE_TIMEOUT,
    );
    p.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    });
  });
}

/** A web/1 frame (§2). */
export type Frame = { t: string; [k: string]: unknown };

/** Encodes a frame: 4-byte big-endian length, then its JSON. */
export function encodeFrame(f: Frame): Uint8Array {
  const j = utf8.encode(JSON.stringify(f));
  if (j.length > MAX_FRAME) throw new ChannelError('TOO_LARGE', `a frame of ${j.length} bytes is over the limit of ${MAX_FRAME}`);
  const b = new Uint8Array(4 + j.length);
  new DataView(b.buffer).setUint32(0, j.length);
  b.set(j, 4);
  return b;
}

/** Reassembles frames from a byte stream split anyhow. */
export class FrameReader {
  private chunks: Uint8Array[] = [];
  private size = 0;

  /** Adds bytes and returns the frames they complete; throws a ChannelError for a malformed stream. */
  push(b: Uint8Array): Frame[] {
    if (b.length) {
      this.chunks.push(b);
      this.size += b.length;
    }
    const out: Frame[] = [];
    while (this.size >= 4) {
      const head = this.peek(4);
      const n = new DataView(head.buffer, head.byteOffset, 4).getUint32(0);
      if (n > MAX_FRAME) throw new ChannelError('PROTOCOL', `a frame of ${n} bytes is over the limit of ${MAX_FRAME}`);
      if (this.size < 4 + n) break; // a big frame's chunks are joined once, when the last one came
      const body = this.peek(4 + n).subarray(4);
      this.skip(4 + n);
      let f: unknown;
      try {
        f = JSON.parse(fromUtf8(body));
      } catch {
        throw new ChannelError('PROTOCOL', 'a frame is not JSON');
      }
      if (!f || typeof f !== 'object' || typeof (f as Frame).t !== 'string') throw new ChannelError('PROTOCOL', 'a frame is not an object with a type');
      out.push(f as Frame);
    }
    return out;
  }

  /** The first n buffered bytes, joining chunks as needed (n <= size). */
  private peek(n: number): Uint8Array {
    if (this.chunks[0].length < n) {
      const j = new Uint8Array(this.size);
      let i = 0;
      for (const c of this.chunks) {
        j.set(c, i);
        i += c.length;
      }
      this.chunks = [j];
    }
    return this.chunks[0].subarray(0, n);
  }

  private skip(n: number): void {
    this.chunks[0] = this.chunks[0].subarray(n);
    this.size -= n;
    if (!this.chunks[0].length) this.chunks.shift();
  }
}

/** How long a closing event socket waits for the machine's ws.close before the next may open. */
const EVENTS_CLOSE_WAIT = 5000;

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

class Events implements EventSocket {
  readyState = CONNECTING;
  onopen: EventSocket['onopen'] = null;
  onmessage: EventSocket['onmessage'] = null;
  onclose: EventSocket['onclose'] = null;
  onerror: EventSocket['onerror'] = null;
  static readonly CONNECTING = CONNECTING;
  static readonly OPEN = OPEN;
  static readonly CLOSING = CLOSING;
  static readonly CLOSED = CLOSED;

  constructor(private readonly ch: Channel, readonly subscriptions: unknown[] | undefined) {}

  send(text: string): void {
    if (this.readyState === CONNECTING) throw new DOMException('the event socket is still connecting', 'InvalidStateError');
    if (this.readyState !== OPEN) return; // as a WebSocket: dropped once closing
    this.ch.sendFrame({ t: 'ws', data: text });
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState === CLOSING || this.readyState === CLOSED) return;
    this.ch.closeEvents(this);
    this.ended(code, reason, true);
  }

  /** Messages that came before onopen could run (a quick machine): delivered after it. */
  private early: string[] = [];

  /** Opened by the channel (the ws.open frame left). */
  opened(): void {
    if (this.readyState !== CONNECTING) return;
    this.readyState = OPEN;
    this.onopen?.({ type: 'open' });
    for (const data of this.early.splice(0)) if (this.readyState === OPEN) this.onmessage?.({ data });
  }

  /** A server message of this socket. */
  message(data: string): void {
    if (this.readyState === CONNECTING) this.early.push(data);
    else if (this.readyState === OPEN) this.onmessage?.({ data });
  }

  ended(code: number, reason: string, wasClean: boolean): void {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSED;
    setTimeout(() => {
      if (!wasClean) this.onerror?.({ type: 'error' });
      this.onclose?.({ code, reason, wasClean });
    }, 0);
  }
}

type Pending = { resolve: (a: Answer) => void; reject: (e: Error) => void };

/** The web/1 channel over an IK Conn. */
export class Channel implements WebChannel {
  onclose: WebChannel['onclose'] = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly frames = new FrameReader();
  private events: Events | undefined; // the open (or opening) event socket
  private waiting: Events[] = []; // sockets to open once the last closed one is confirmed
  private closingEvents: ReturnType<typeof setTimeout> | undefined; // waiting for the machine's ws.close
  private ended = false;

  constructor(private readonly c: Carrier, private readonly tx: CipherState, private readonly rx: CipherState) {
    void this.receive();
  }

  get closed(): boolean {
    return this.ended;
  }

  request(method: string, path: string, body?: string, signal?: AbortSignal): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError());
        return;
      }
      if (this.ended) {
        reject(new ChannelError('CLOSED', 'the channel is closed'));
        return;
      }
      const id = this.nextId++;
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        try {
          this.sendFrame({ t: 'cancel', id });
        } catch {
          /* the channel ended */
        }
        reject(abortError());
      };
      this.pending.set(id, {
        resolve: (a) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(a);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const f: Frame = { t: 'req', id, method, path };
      if (body !== undefined) f.body = body;
      try {
        this.sendFrame(f);
      } catch (e) {
        this.pending.delete(id);
        reject(e);
      }
    });
  }

  openEvents(subscriptions?: unknown[]): EventSocket {
    const ev = new Events(this, subscriptions);
    if (this.ended) {
      ev.ended(1006, 'the channel is closed', false);
      return ev;
    }
    if (this.events) this.events.close();
    if (this.closingEvents !== undefined) this.waiting.push(ev);
    else this.startEvents(ev);
    return ev;
  }

  private startEvents(ev: Events): void {
    this.events = ev;
    const f: Frame = { t: 'ws.open' };
    if (ev.subscriptions !== undefined) f.subscriptions = ev.subscriptions;
    try {
      this.sendFrame(f);
    } catch {
      return; // the channel ended: its end closes ev
    }
    setTimeout(() => ev.opened(), 0);
  }

  /** The app closed ev: tell the machine, and open the next only once it confirmed. */
  closeEvents(ev: Events): void {
    this.waiting = this.waiting.filter((w) => w !== ev);
    if (this.events !== ev) return;
    this.events = undefined;
    if (this.ended) return;
    try {
      this.sendFrame({ t: 'ws.close' });
    } catch {
      return;
    }
    this.closingEvents = setTimeout(() => this.eventsClosed(), EVENTS_CLOSE_WAIT);
  }

  private eventsClosed(): void {
    clearTimeout(this.closingEvents);
    this.closingEvents = undefined;
    const next = this.waiting.pop();
    for (const w of this.waiting.splice(0)) w.ended(1000, 'replaced', true);
    if (next && !this.ended) this.startEvents(next);
  }

  close(): void {
    this.end(undefined, 'the channel is closed');
  }

  /** Sends one frame, in as many transport messages as it needs. */
  sendFrame(f: Frame): void {
    if (this.ended) throw new ChannelError('CLOSED', 'the channel is closed');
    const b = encodeFrame(f);
    for (let i = 0; i < b.length; i += MAX_PAYLOAD) this.c.send(this.tx.encrypt(b.subarray(i, i + MAX_PAYLOAD)));
  }

  private async receive(): Promise<void> {
    try {
      for (;;) {
        const m = await this.c.recv();
        if (!m) {
          this.end(undefined, 'the machine closed the channel');
          return;
        }
        if (m.length > MAX_MSG) throw new ChannelError('PROTOCOL', `a message of ${m.length} bytes is over the Noise limit of ${MAX_MSG}`);
        let p: Uint8Array;
        try {
          p = this.rx.decrypt(m);
        } catch {
          throw new ChannelError('INTEGRITY', 'a message of the channel did not authenticate: the relay altered, dropped or replayed one');
        }
        for (const f of this.frames.push(p)) this.dispatch(f);
      }
    } catch (e) {
      const err = e instanceof ChannelError ? e : new ChannelError('PROTOCOL', String(e));
      if (!this.ended && err.code !== 'CLOSED') this.end(err, err.message);
      else this.end(undefined, err.message);
    }
  }

  private dispatch(f: Frame): void {
    switch (f.t) {
      case 'res': {
        const p = this.pending.get(f.id as number);
        if (!p) return; // cancelled
        this.pending.delete(f.id as number);
        p.resolve({ status: Number(f.status), body: typeof f.body === 'string' ? f.body : '' });
        return;
      }
      case 'ws':
        if (typeof f.data === 'string') this.events?.message(f.data);
        return;
      case 'ws.close': {
        if (this.closingEvents !== undefined) {
          this.eventsClosed();
          return;
        }
        const ev = this.events;
        this.events = undefined;
        ev?.ended(typeof f.code === 'number' ? f.code : 1000, typeof f.reason === 'string' ? f.reason : '', true);
        return;
      }
      default:
        return; // a later version's frame
    }
  }

  private end(err: ChannelError | undefined, why: string): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.closingEvents);
    this.c.close();
    const rej = err ?? new ChannelError('CLOSED', why);
    for (const p of this.pending.values()) p.reject(rej);
    this.pending.clear();
    for (const ev of [this.events, ...this.waiting]) ev?.ended(err?.wsCode || (err ? 1006 : 1000), err?.message ?? why, !err);
    this.events = undefined;
    this.waiting = [];
    const cb = this.onclose;
    if (cb) setTimeout(() => cb(err), 0);
  }
}

// ---------------------------------------------------------------- pairing (XXpsk3)

/** The Noise PSK of a pairing (Go's pairingPSK). */
export function pairingPSK(secret: Uint8Array, machineId: string, offer: string): Uint8Array {
  if (secret.length < 16) throw new ChannelError('INVALID', `pairing secret of ${secret.length} bytes is under the minimum of 16`);
  return hkdf(sha256, secret, utf8.encode(PSK_SALT), utf8.encode(machineId + '\x00' + offer), 32);
}

const unauthenticated = () =>
  new ChannelError('PAIRING_FAILED', 'pairing failed: the handshake did not authenticate: the code is wrong, expired or already used, or the relay altered the exchange');

/** pair of the API: a WebSocket to /api/pair with the code's ticket (a share code: the login), then pairOver. */
export async function pair(opts: PairOptions, WS?: WebSocketCtor): Promise<Pairing> {
  const code = typeof opts.code === 'string' ? parsePairingCode(opts.code) : opts.code;
  validatePairingCode(code);
  const shareUser = shareCodeUser(code);
  if (shareUser !== undefined && !opts.loginToken) {
    throw new ChannelError('INVALID', `this code shares a session with user ${shareUser}: log in to the relay as ${shareUser} first, then pair with it`);
  }
  const token = shareUser !== undefined ? opts.loginToken! : code.ticket;
  const c = await wsCarrier(opts.wsUrl ?? defaultUrl('/api/pair'), token, code.machineId, opts.signal, WS);
  return pairOver(c, { ...opts, code });
}

/**
 * Runs Noise_XXpsk3 over c as the device (Go's e2ee.PairDevice, then agent/client.Pair's Welcome
 * and "stored"). The machine's key is checked against the code's fingerprint before this device
 * sends its own key or hello. Closes c in the end. ephemeral fixes the ephemeral key (tests).
 */
export async function pairOver(c: Carrier, opts: PairOptions & { code: PairingCode }, ephemeral?: Uint8Array): Promise<Pairing> {
  const code = opts.code;
  try {
    validatePairingCode(code);
    const hello = utf8.encode(JSON.stringify({ name: opts.name }));
    if (hello.length > MAX_HELLO) throw new ChannelError('INVALID', `hello of ${hello.length} bytes is over the limit of ${MAX_HELLO}`);
    const hs = new HandshakeState({
      pattern: XXpsk3,
      initiator: true,
      prologue: utf8.encode(PAIR_PROLOGUE + code.machineId),
      s: staticKey(opts.deviceKey),
      psk: pairingPSK(code.secret, code.machineId, code.offer),
      ephemeral,
    });
    c.send((await hs.writeMessage(utf8.encode(code.offer))).message);
    const msg2 = await withAbort(c.recv(), opts.signal);
    if (!msg2) throw unauthenticated();
    let payload: Uint8Array;
    try {
      payload = (await hs.readMessage(msg2)).payload;
    } catch {
      throw unauthenticated();
    }
    if (payload.length) throw new ChannelError('PROTOCOL', `pairing message 2 carries ${payload.length} bytes, where this version expects none`);
    const machineKey = hs.remoteStatic()!;
    if (!matchesFingerprint(machineKey, code.fingerprint)) {
      throw new ChannelError('KEY_MISMATCH', 'pairing failed: the machine\'s key does not match the fingerprint in the code: something between this device and the machine substituted its key');
    }
    const m3 = await hs.writeMessage(hello);
    if (!m3.done) throw new ChannelError('PROTOCOL', 'the handshake did not finish');
    const { send, recv } = m3.done;
    c.send(m3.message);
    const next = async (): Promise<Uint8Array> => {
      const m = await withAbort(c.recv(), opts.signal);
      if (!m) throw unauthenticated();
      try {
        return recv.decrypt(m);
      } catch {
        throw unauthenticated();
      }
    };
    const confirm = await next();
    if (confirm.length !== 1 || confirm[0] !== 0) throw new ChannelError('PROTOCOL', `the machine's confirmation is malformed (${confirm.length} bytes)`);
    let w: {
      machine_id?: string; machine_name?: string; device_id?: string; token?: string; error?: string;
      share?: { id?: string; session_id?: string; mode?: string; expires_at?: string };
    };
    try {
      w = JSON.parse(fromUtf8(await next()));
    } catch (e) {
      if (e instanceof ChannelError) throw e;
      throw new ChannelError('PROTOCOL', 'pairing: the machine\'s answer is malformed');
    }
    if (w.error) throw new ChannelError('PAIRING_FAILED', 'pairing failed on the machine: ' + w.error);
    if (w.machine_id !== code.machineId || !w.token) {
      throw new ChannelError('PROTOCOL', 'pairing: the machine\'s answer names another machine or carries no credential');
    }
    c.send(send.encrypt(utf8.encode('stored')));
    // The machine ends the call once it read "stored"; wait a little for that before closing.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([c.recv().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, 2000)))]);
    clearTimeout(timer);
    return {
      machineId: w.machine_id,
      machineName: w.machine_name ?? '',
      relay: code.relay,
      machineKey: base64(machineKey),
      fingerprint: fingerprint(machineKey),
      token: w.token,
      deviceId: w.device_id ?? '',
      pairedAt: new Date().toISOString(),
      ...(w.share?.session_id
        ? { share: { id: w.share.id ?? '', sessionId: w.share.session_id, mode: w.share.mode === 'answer' ? 'answer' : 'read', expiresAt: w.share.expires_at ?? '' } as const }
        : {}),
    };
  } finally {
    c.close();
  }
}
