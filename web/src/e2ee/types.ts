// Types shared by the e2ee modules (see index.ts for the API).
import type { DeviceKey } from './keys';
import type { PairingCode } from './code';

/** A machine this device paired with (IndexedDB "pairings", docs/e2ee-wire.md §5). */
export interface Pairing {
  machineId: string;
  machineName: string;
  relay: string; // the relay's host:port, from the pairing code
  machineKey: string; // the machine's static X25519 key, standard base64
  fingerprint: string; // fingerprint(machineKey bytes)
  token: string; // the device's relay credential (scope device, this machine)
  deviceId: string; // the machine's id of this device
  pairedAt: string; // ISO 8601
  share?: SharedSession; // set when this device was paired with a session share's code
}

/** The one session a share's device may see (docs/security.md, "Sharing a session"). */
export interface SharedSession {
  id: string; // the share's id
  sessionId: string;
  mode: 'read' | 'answer';
  expiresAt: string; // ISO 8601
}

/** What the machine answered a request with. */
export interface Answer {
  status: number;
  body: string; // JSON text, or ""
}

export interface ChannelOptions {
  machineId: string;
  machineKey: Uint8Array | string; // 32 bytes, or standard base64
  token: string;
  deviceKey: DeviceKey;
  hello: { name: string; version: string };
  wsUrl?: string; // default: ws(s)://<this host>/api/channel
  signal?: AbortSignal; // gives up the handshake
}

export interface PairOptions {
  code: string | PairingCode;
  deviceKey: DeviceKey;
  name: string;
  wsUrl?: string; // default: ws(s)://<this host>/api/pair
  signal?: AbortSignal;
  // The relay login of this browser's user: a session share's code carries no relay credential
  // (its ticket is "share:USER"), and the Pair call is made with USER's own login.
  loginToken?: string;
}

export interface WebChannel {
  request(method: string, path: string, body?: string, signal?: AbortSignal): Promise<Answer>;
  openEvents(subscriptions?: unknown[]): EventSocket;
  close(): void;
  readonly closed: boolean;
  /** Called once when the channel ends: undefined for a normal end, else why. */
  onclose: ((err: ChannelError | undefined) => void) | null;
}

export interface EventSocket {
  readonly readyState: number;
  onopen: ((ev: { type: 'open' }) => void) | null;
  onmessage: ((ev: { data: string }) => void) | null;
  onclose: ((ev: { code: number; reason: string; wasClean: boolean }) => void) | null;
  onerror: ((ev: { type: 'error' }) => void) | null;
  send(text: string): void;
  close(code?: number, reason?: string): void;
}

/** Why a channel or a pairing failed. */
export class ChannelError extends Error {
  /** BetCode's error code (from the WebSocket close reason), or one of this library's. */
  readonly code: string;
  /** The WebSocket close code (4401, 4503 …), 0 when there is none. */
  readonly wsCode: number;
  constructor(code: string, message: string, wsCode = 0) {
    super(message);
    this.name = 'ChannelError';
    this.code = code;
    this.wsCode = wsCode;
  }
}
