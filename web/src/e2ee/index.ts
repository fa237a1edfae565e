// The browser's end-to-end crypto and transport (docs/e2ee-wire.md): the device key and the
// pairings in IndexedDB, pairing with a machine, channels to it, sealed envelopes.
//
// API (everything here is cheap to import statically: the Noise code, @noble/*, loads on the
// first call of openChannel, pair or seal, as its own chunk):
//
//   loadOrCreateDeviceKey(): Promise<DeviceKey>     the device's X25519 key (IndexedDB "device-key";
//                                                   WebCrypto, non-extractable, where the browser has it)
//   listPairings(): Promise<Pairing[]>              IndexedDB "pairings"
//   getPairing(machineId): Promise<Pairing | undefined>
//   savePairing(p): Promise<void>                   adds or replaces (by machineId)
//   removePairing(machineId): Promise<void>
//   getCurrentMachine(): Promise<string | undefined> / setCurrentMachine(id | undefined)
//   parsePairingCode(text): PairingCode             throws PairingCodeError (message for people)
//   shareCodeUser(code): string | undefined         the user a session share's code is for (ticket "share:USER")
//   fingerprint(pub): string                        "ab12 cd34 …" (16 groups of 4 hex), as Go's e2ee.Fingerprint
//   fingerprintId(pub): string                      16 hex characters, as Go's e2ee.FingerprintID
//   base64 / unbase64                               standard base64 with padding (the doc's JSON form)
//
//   pair({code, deviceKey, name, wsUrl?}): Promise<Pairing>
//       WebSocket /api/pair, Noise_XXpsk3 as Go's PairDevice; the machine key is checked against the
//       code's fingerprint before the device sends its own key. The caller stores the result
//       (savePairing). `code` is the text or a parsed PairingCode. `relay` of the result is the code's.
//   openChannel({machineId, machineKey, token, deviceKey, hello:{name, version}, wsUrl?, signal?})
//       : Promise<WebChannel>
//       WebSocket /api/channel, Noise_IK, then the web/1 frames. machineKey: 32 bytes or base64.
//   WebChannel:
//       request(method, path, body?, signal?): Promise<{status, body}>   path after /api, e.g. "/sessions?limit=5";
//                                                   body is JSON text (string) or undefined
//       openEvents(subscriptions?): EventSocket     the /api/ws stream inside the channel (one at a time)
//       close(): void;  closed: boolean;  onclose: ((err: ChannelError | undefined) => void) | null
//   EventSocket (a WebSocket look-alike): readyState (CONNECTING 0, OPEN 1, CLOSING 2, CLOSED 3),
//       onopen, onmessage({data: string}), onclose({code, reason, wasClean}), onerror,
//       send(text), close(code?, reason?). onopen fires asynchronously once the ws.open frame left,
//       so handlers set right after openEvents() see it. The store's hello (token) is not needed inside
//       a channel: subscriptions go in openEvents(subscriptions); a {"type":"hello"} sent through
//       send() is passed on as it is.
//   ChannelError (extends Error): code, wsCode (the WebSocket close code, e.g. 4401, 4503; 0 when
//       none), message (for people). code is the relay's BetCode code from a 4xxx close
//       ("UNAUTHENTICATED", "MACHINE_OFFLINE" …; "HTTP_<status>" when it sent none), or this library's:
//         REFUSED        the machine refused this device (message ends with its authenticated reason)
//         HANDSHAKE      the machine's answer did not authenticate (another key or machine id: pair again)
//         NO_ANSWER      the machine ended the channel without answering (stale pairing?)
//         KEY_MISMATCH   pairing: the machine's key is not the code's fingerprint (substituted)
//         PAIRING_FAILED pairing: wrong, expired or used code, or the machine's own failure (Welcome.error)
//         INTEGRITY      a channel message did not authenticate (the relay altered one): the channel ended
//         PROTOCOL       a malformed message or frame;  TOO_LARGE  over a limit (1009)
//         UNAVAILABLE    the WebSocket failed or closed abnormally (1006 …);  CLOSED  closed locally
//         INVALID        bad arguments (machine key not 32 bytes, hello too long)
//         TIMEOUT        no answer within 30 s during a handshake
//   Event socket closes: the machine's ws.close {code, reason}; the app's close(); the channel's end
//       (its wsCode, e.g. 4401, or 1006 when it failed, 1000 when it ended normally). After the app
//       closes one, the next openEvents() sends its ws.open only once the machine's ws.close confirmed
//       the end (or after 5 s), so that no message of the old socket reaches the new one: the machine
//       answers every ws.close with a ws.close.
//
//   seal(deviceKey, machineId, machineKey, payload): Promise<Uint8Array>   Noise_X one-shot (§3)
//   sealedPayload(kind, fields): {v:1, id, at, kind, ...fields}            id: 128 random bits in hex
export type { DeviceKey } from './keys';
export type { Pairing, SharedSession } from './types';
export type { PairingCode } from './code';
export type { WebChannel, EventSocket, ChannelOptions, PairOptions, Answer } from './types';
export { ChannelError } from './types';
export { loadOrCreateDeviceKey, listPairings, getPairing, savePairing, removePairing, getCurrentMachine, setCurrentMachine } from './keys';
export { parsePairingCode, shareCodeUser, PairingCodeError, fingerprint, fingerprintId, base64, unbase64 } from './code';
export { sealedPayload } from './payload';

import type { DeviceKey } from './keys';
import type { ChannelOptions, PairOptions, Pairing, WebChannel } from './types';

/** Opens an end-to-end channel to a paired machine (see the API above). */
export async function openChannel(opts: ChannelOptions): Promise<WebChannel> {
  const m = await import('./channel');
  return m.openChannel(opts);
}

/** Pairs this device with the machine that printed the code (see the API above). */
export async function pair(opts: PairOptions): Promise<Pairing> {
  const m = await import('./channel');
  return m.pair(opts);
}

/** Seals payload (a sealedPayload object) for machineId's key: one Noise_X message. */
export async function seal(deviceKey: DeviceKey, machineId: string, machineKey: Uint8Array | string, payload: object): Promise<Uint8Array> {
  const m = await import('./seal');
  return m.seal(deviceKey, machineId, machineKey, payload);
}
