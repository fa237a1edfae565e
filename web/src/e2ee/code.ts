// Pairing codes and key fingerprints, exactly as Go's shared/e2ee (code.go, keys.go) writes and
// reads them.
import { sha256 } from '@noble/hashes/sha2.js';

/** What `betcode-agent pair` prints: everything a device needs to pair through a relay. */
export interface PairingCode {
  relay: string; // host:port of the relay
  machineId: string;
  fingerprint: string; // the machine key's fingerprint (fingerprint() form)
  offer: string; // 16 lower-case hex characters
  secret: Uint8Array; // 16 to 64 bytes; never goes to the relay
  ticket: string; // the relay credential for the pairing (a "bct_" token)
}

/** The user a session share's code is for (its ticket is "share:USER"), or undefined for a pairing code. */
export function shareCodeUser(code: PairingCode): string | undefined {
  return code.ticket.startsWith('share:') ? code.ticket.slice('share:'.length) : undefined;
}

/** A code that cannot be read or cannot work; the message says what to do. */
export class PairingCodeError extends Error {
  constructor(message: string) {
    super('invalid pairing code: ' + message);
    this.name = 'PairingCodeError';
  }
}

const CODE_PREFIX = 'betcode-pair:';
const CODE_VERSION = 1;
export const MIN_SECRET = 16;
export const MAX_SECRET = 64;
const OFFER_LEN = 8;
const MAX_CODE_FIELD = 255;
const MAX_CODE_TEXT = 2048;
const FIELDS = ['fingerprint', 'offer', 'secret', 'relay', 'machine id', 'ticket'] as const;

export const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

function unhex(s: string): Uint8Array | undefined {
  if (s.length % 2 || !/^[0-9a-fA-F]*$/.test(s)) return undefined;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const groupHex = (h: string): string => h.match(/.{1,4}/g)?.join(' ') ?? '';

/** The SHA-256 of pub in lower-case hex, in 16 groups of 4 separated by spaces (Go's Fingerprint). */
export const fingerprint = (pub: Uint8Array): string => groupHex(hex(sha256(pub)));

/** The first 16 hex characters of pub's SHA-256 (Go's FingerprintID). */
export const fingerprintId = (pub: Uint8Array): string => hex(sha256(pub).subarray(0, 8));

/** The 32-byte hash that fp names, grouped or as 64 hex characters (Go's ParseFingerprint). */
export function parseFingerprint(fp: string): Uint8Array {
  const h = fp.trim().replaceAll(' ', '');
  if (h.length !== 64) throw new Error(`fingerprint "${fp}" has ${h.length} hex digits, not 64`);
  const b = unhex(h);
  if (!b) throw new Error(`fingerprint "${fp}" is not hex`);
  return b;
}

/** Whether pub is the key that fp names (a malformed fp matches nothing), in constant time. */
export function matchesFingerprint(pub: Uint8Array, fp: string): boolean {
  let want: Uint8Array;
  try {
    want = parseFingerprint(fp);
  } catch {
    return false;
  }
  const got = sha256(pub);
  let d = 0;
  for (let i = 0; i < 32; i++) d |= got[i] ^ want[i];
  return d === 0;
}

// ---------------------------------------------------------------- base64

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 with padding. */
export function base64(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i += 3) {
    const n = (b[i] << 16) | ((b[i + 1] ?? 0) << 8) | (b[i + 2] ?? 0);
    s += B64[n >> 18] + B64[(n >> 12) & 63] + (i + 1 < b.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < b.length ? B64[n & 63] : '=');
  }
  return s;
}

/** Decodes strict base64 (standard alphabet with padding, or url with url=true and none); throws if malformed. */
export function unbase64(s: string, url = false): Uint8Array {
  if (!url) {
    if (s.length % 4) throw new Error('base64 of a length that is not a multiple of 4');
    s = s.replace(/={1,2}$/, '');
  }
  const alpha = url ? B64.slice(0, 62) + '-_' : B64;
  if (s.length % 4 === 1) throw new Error('base64 of an impossible length');
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let j = 0;
  for (let i = 0; i < s.length; i++) {
    const v = alpha.indexOf(s[i]);
    if (v < 0) throw new Error(`illegal base64 data at input byte ${i}`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[j++] = (acc >> bits) & 255;
    }
  }
  if (acc & ((1 << bits) - 1)) throw new Error(`illegal base64 data at input byte ${s.length - 1}`); // strict: unused bits are zero
  return out;
}

// ---------------------------------------------------------------- CRC-32 (IEEE)

let crcTable: Uint32Array | undefined;

export function crc32(b: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (const x of b) c = crcTable[(c ^ x) & 255] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// ---------------------------------------------------------------- the code

/** Reads a code's text (space around it is ignored), as Go's ParsePairingCode. */
export function parsePairingCode(text: string): PairingCode {
  try {
    return parse(text.trim());
  } catch (e) {
    throw new PairingCodeError((e as Error).message);
  }
}

/** Go's binary.Uvarint: the value and the bytes read (0: too short, <0: overflow). */
function uvarint(b: Uint8Array): [number, number] {
  let x = 0n;
  let s = 0n;
  for (let i = 0; i < b.length; i++) {
    if (i === 10) return [0, -(i + 1)];
    const c = b[i];
    if (c < 0x80) {
      if (i === 9 && c > 1) return [0, -(i + 1)];
      x |= BigInt(c) << s;
      return [x > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(x), i + 1];
    }
    x |= BigInt(c & 0x7f) << s;
    s += 7n;
  }
  return [0, 0];
}

function parse(s: string): PairingCode {
  if (s === '') throw new Error('it is empty');
  if (s.length > MAX_CODE_TEXT) throw new Error(`it is ${s.length} characters, more than a pairing code's ${MAX_CODE_TEXT}`);
  if (!s.startsWith(CODE_PREFIX)) throw new Error(`it does not start with "${CODE_PREFIX}": copy the whole text that \`betcode-agent pair\` printed`);
  const rest = s.slice(CODE_PREFIX.length);
  const colon = rest.indexOf(':');
  if (colon < 0) throw new Error(`it has no version after "${CODE_PREFIX}"`);
  const version = rest.slice(0, colon);
  const body = rest.slice(colon + 1);
  if (!/^[+-]?[0-9]+$/.test(version) || Number(version) < 0) throw new Error(`its version "${version}" is not a number`);
  const v = Number(version);
  if (v !== CODE_VERSION) {
    throw new Error(`it is version ${v}, and this betcode reads version ${CODE_VERSION}: update betcode and betcode-agent to the same release`);
  }
  let b: Uint8Array;
  try {
    b = unbase64(body.replace(/[\r\n]/g, ''), true); // Go's decoder skips CR and LF
  } catch (e) {
    throw new Error(`it is not base64url after the version (was it cut or altered when copied?): ${(e as Error).message}`);
  }
  if (b.length < 4) throw new Error('it is too short: the text was cut when copied');
  const sum = new DataView(b.buffer, b.byteOffset + b.length - 4, 4).getUint32(0);
  b = b.subarray(0, b.length - 4);
  if (crc32(b) !== sum) throw new Error('its checksum does not match: the text was altered when copied');
  const f: Uint8Array[] = [];
  for (const name of FIELDS) {
    const [n, k] = uvarint(b);
    if (k <= 0 || n > b.length - k) throw new Error(`it ends inside its ${name} field`);
    f.push(b.subarray(k, k + n));
    b = b.subarray(k + n);
  }
  if (b.length !== 0) throw new Error(`${b.length} bytes follow its last field`);
  if (f[0].length !== 32) throw new Error(`its fingerprint is ${f[0].length} bytes, not 32`);
  if (f[1].length !== OFFER_LEN) throw new Error(`its offer is ${f[1].length} bytes, not ${OFFER_LEN}`);
  // One character per byte, as Go's string(b): the printable-ASCII check then refuses what it refuses.
  const text = { decode: (x: Uint8Array) => String.fromCharCode(...x) };
  const c: PairingCode = {
    fingerprint: groupHex(hex(f[0])),
    offer: hex(f[1]),
    secret: f[2].slice(),
    relay: text.decode(f[3]),
    machineId: text.decode(f[4]),
    ticket: text.decode(f[5]),
  };
  validate(c);
  return c;
}

/** Throws PairingCodeError for a code that cannot work, as Go's PairingCode.Validate. */
export function validatePairingCode(c: PairingCode): void {
  try {
    validate(c);
  } catch (e) {
    throw new PairingCodeError((e as Error).message);
  }
}

export const validOffer = (s: string): boolean => /^[0-9a-f]{16}$/.test(s);

function validate(c: PairingCode): void {
  try {
    parseFingerprint(c.fingerprint);
  } catch (e) {
    throw new Error(`its machine fingerprint: ${(e as Error).message}`);
  }
  if (!validOffer(c.offer)) throw new Error(`its offer "${c.offer}" is not ${2 * OFFER_LEN} lower-case hex characters`);
  if (c.secret.length < MIN_SECRET) {
    throw new Error(`its secret is ${c.secret.length} bytes; a pairing needs at least ${MIN_SECRET} (${8 * MIN_SECRET} bits)`);
  }
  if (c.secret.length > MAX_SECRET) throw new Error(`its secret is ${c.secret.length} bytes, more than ${MAX_SECRET}`);
  for (const [name, v] of [['relay', c.relay], ['machine id', c.machineId], ['ticket', c.ticket]] as const) checkCodeText(name, v);
  const hp = splitHostPort(c.relay);
  if (!hp || !hp[0] || !hp[1]) throw new Error(`its relay "${c.relay}" is not host:port`);
}

function checkCodeText(name: string, v: string): void {
  if (v === '') throw new Error(`it has no ${name}`);
  const n = new TextEncoder().encode(v).length;
  if (n > MAX_CODE_FIELD) throw new Error(`its ${name} is ${n} bytes, more than ${MAX_CODE_FIELD}`);
  for (let i = 0; i < v.length; i++) {
    const ch = v.charCodeAt(i);
    if (ch <= 0x20 || ch > 0x7e) throw new Error(`its ${name} has a character that is not printable ASCII (at byte ${i})`);
  }
}

/** Go's net.SplitHostPort: [host, port], or undefined when s is not host:port. */
export function splitHostPort(s: string): [string, string] | undefined {
  const i = s.lastIndexOf(':');
  if (i < 0) return undefined;
  let host: string;
  let j = 0;
  let k = 0;
  if (s[0] === '[') {
    const end = s.indexOf(']');
    if (end < 0 || end + 1 !== i) return undefined;
    host = s.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = s.slice(0, i);
    if (host.includes(':')) return undefined;
  }
  if (s.slice(j).includes('[') || s.slice(k).includes(']')) return undefined;
  return [host, s.slice(i + 1)];
}

/** The code's text, as Go's PairingCode.String (for tests and tools). */
export function formatPairingCode(c: PairingCode): string {
  const enc = new TextEncoder();
  let fp: Uint8Array = new Uint8Array(0);
  try {
    fp = parseFingerprint(c.fingerprint);
  } catch {
    /* as Go: an empty field */
  }
  const offer = (validOffer(c.offer) && unhex(c.offer)) || new Uint8Array(0);
  const parts: number[] = [];
  for (const f of [fp, offer, c.secret, enc.encode(c.relay), enc.encode(c.machineId), enc.encode(c.ticket)]) {
    let n = f.length;
    while (n >= 0x80) {
      parts.push((n & 0x7f) | 0x80);
      n >>>= 7;
    }
    parts.push(n);
    parts.push(...f);
  }
  const b = new Uint8Array(parts.length + 4);
  b.set(parts);
  new DataView(b.buffer).setUint32(parts.length, crc32(b.subarray(0, parts.length)));
  return CODE_PREFIX + CODE_VERSION + ':' + base64(b).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}
