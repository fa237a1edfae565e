// The Noise protocol framework (revision 34, https://noiseprotocol.org/noise.html), as small as
// BetCode needs: the cipher suite 25519_ChaChaPoly_SHA256 and the patterns IK, XXpsk3 and X, on the
// audited primitives of @noble/*. The names follow the specification's (§5: CipherState,
// SymmetricState, HandshakeState), so that each step can be checked against it; the Go side is
// github.com/flynn/noise, and web/test/e2ee.test.ts checks this byte for byte against it.
import { chacha20poly1305 } from '@noble/ciphers/chacha.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { hmac } from '@noble/hashes/hmac.js';

export const DHLEN = 32;
export const HASHLEN = 32;
export const TAGLEN = 16;
/** The most bytes one Noise message may have (§3). */
export const MAX_MSG = 65535;

const EMPTY = new Uint8Array(0);

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}

// ---------------------------------------------------------------- DH (§4.1)

/** A static key pair: its public half and a DH with it (WebCrypto's deriveBits or noble's). */
export interface StaticKey {
  publicKey: Uint8Array;
  dh(pub: Uint8Array): Promise<Uint8Array>;
}

/** An X25519 key pair held as bytes (ephemeral keys, and static keys where WebCrypto has no X25519). */
export class BytesKey implements StaticKey {
  readonly publicKey: Uint8Array;
  constructor(readonly privateKey: Uint8Array) {
    if (privateKey.length !== DHLEN) throw new Error(`an X25519 private key is ${DHLEN} bytes, not ${privateKey.length}`);
    this.publicKey = x25519.getPublicKey(privateKey);
  }
  /** GENERATE_KEYPAIR(); with fixed bytes (tests) the same private key as Go's noise reading them. */
  static generate(fixed?: Uint8Array): BytesKey {
    return new BytesKey(fixed ?? crypto.getRandomValues(new Uint8Array(DHLEN)));
  }
  dhSync(pub: Uint8Array): Uint8Array {
    return x25519.getSharedSecret(this.privateKey, pub); // throws for a low-order point, as Go does
  }
  async dh(pub: Uint8Array): Promise<Uint8Array> {
    return this.dhSync(pub);
  }
}

/** A WebCrypto X25519 key pair (the private half non-extractable). */
export class WebCryptoKey implements StaticKey {
  constructor(readonly privateKey: CryptoKey, readonly publicKey: Uint8Array) {}
  async dh(pub: Uint8Array): Promise<Uint8Array> {
    const peer = await crypto.subtle.importKey('raw', pub.slice() as Uint8Array<ArrayBuffer>, { name: 'X25519' }, false, []);
    const bits = await crypto.subtle.deriveBits({ name: 'X25519', public: peer } as unknown as AlgorithmIdentifier, this.privateKey, 256);
    return new Uint8Array(bits);
  }
}

// ---------------------------------------------------------------- HASH, HKDF (§4.3)

const hash = (...data: Uint8Array[]): Uint8Array => sha256(concat(...data));
const HMAC = (key: Uint8Array, ...data: Uint8Array[]): Uint8Array => hmac(sha256, key, concat(...data));

/** HKDF(chaining_key, input_key_material, num_outputs) of §4.3. */
export function HKDF(ck: Uint8Array, ikm: Uint8Array, n: 2 | 3): Uint8Array[] {
  const temp = HMAC(ck, ikm);
  const o1 = HMAC(temp, Uint8Array.of(1));
  const o2 = HMAC(temp, o1, Uint8Array.of(2));
  if (n === 2) return [o1, o2];
  return [o1, o2, HMAC(temp, o2, Uint8Array.of(3))];
}

// ---------------------------------------------------------------- CipherState (§5.1)

/** ChaChaPoly's nonce (§12.3): 32 bits of zeros, then the counter as 64-bit little-endian. */
function nonce(n: number): Uint8Array {
  const b = new Uint8Array(12);
  new DataView(b.buffer).setBigUint64(4, BigInt(n), true);
  return b;
}

export class CipherState {
  private k: Uint8Array | undefined;
  private n = 0;

  initializeKey(key: Uint8Array | undefined): void {
    this.k = key;
    this.n = 0;
  }
  hasKey(): boolean {
    return this.k !== undefined;
  }
  encryptWithAd(ad: Uint8Array, plaintext: Uint8Array): Uint8Array {
    if (!this.k) return plaintext;
    const c = chacha20poly1305(this.k, nonce(this.n), ad).encrypt(plaintext);
    this.n++;
    return c;
  }
  /** Throws (and leaves n as it was) when the ciphertext does not authenticate. */
  decryptWithAd(ad: Uint8Array, ciphertext: Uint8Array): Uint8Array {
    if (!this.k) return ciphertext;
    const p = chacha20poly1305(this.k, nonce(this.n), ad).decrypt(ciphertext);
    this.n++;
    return p;
  }
  /** A transport message: at most MAX_MSG - TAGLEN bytes of plaintext. */
  encrypt(plaintext: Uint8Array): Uint8Array {
    if (plaintext.length > MAX_MSG - TAGLEN) throw new Error(`a Noise message of ${plaintext.length} bytes of plaintext is over the limit of ${MAX_MSG - TAGLEN}`);
    return this.encryptWithAd(EMPTY, plaintext);
  }
  decrypt(ciphertext: Uint8Array): Uint8Array {
    return this.decryptWithAd(EMPTY, ciphertext);
  }
}

// ---------------------------------------------------------------- SymmetricState (§5.2)

export class SymmetricState {
  readonly cs = new CipherState();
  ck: Uint8Array;
  h: Uint8Array;

  constructor(protocolName: string) {
    const name = new TextEncoder().encode(protocolName);
    if (name.length <= HASHLEN) {
      this.h = new Uint8Array(HASHLEN);
      this.h.set(name);
    } else {
      this.h = hash(name);
    }
    this.ck = this.h;
  }
  mixKey(ikm: Uint8Array): void {
    const [ck, tempK] = HKDF(this.ck, ikm, 2);
    this.ck = ck;
    this.cs.initializeKey(tempK); // HASHLEN is 32: no truncation
  }
  mixHash(data: Uint8Array): void {
    this.h = hash(this.h, data);
  }
  mixKeyAndHash(ikm: Uint8Array): void {
    const [ck, tempH, tempK] = HKDF(this.ck, ikm, 3);
    this.ck = ck;
    this.mixHash(tempH);
    this.cs.initializeKey(tempK);
  }
  encryptAndHash(plaintext: Uint8Array): Uint8Array {
    const c = this.cs.encryptWithAd(this.h, plaintext);
    this.mixHash(c);
    return c;
  }
  decryptAndHash(ciphertext: Uint8Array): Uint8Array {
    const p = this.cs.decryptWithAd(this.h, ciphertext);
    this.mixHash(ciphertext);
    return p;
  }
  split(): [CipherState, CipherState] {
    const [k1, k2] = HKDF(this.ck, EMPTY, 2);
    const c1 = new CipherState();
    const c2 = new CipherState();
    c1.initializeKey(k1);
    c2.initializeKey(k2);
    return [c1, c2];
  }
}

// ---------------------------------------------------------------- patterns (§7)

type Token = 'e' | 's' | 'ee' | 'es' | 'se' | 'ss' | 'psk';

export interface Pattern {
  name: string; // as in the protocol name, modifiers included
  preResponder: 's' | ''; // the responder's pre-message (the initiator knows its static key)
  messages: Token[][];
  psk: boolean;
}

export const IK: Pattern = { name: 'IK', preResponder: 's', messages: [['e', 'es', 's', 'ss'], ['e', 'ee', 'se']], psk: false };
export const XXpsk3: Pattern = { name: 'XXpsk3', preResponder: '', messages: [['e'], ['e', 'ee', 's', 'es'], ['s', 'se', 'psk']], psk: true };
export const X: Pattern = { name: 'X', preResponder: 's', messages: [['e', 'es', 's', 'ss']], psk: false };

// ---------------------------------------------------------------- HandshakeState (§5.3)

export interface HandshakeConfig {
  pattern: Pattern;
  initiator: boolean;
  prologue: Uint8Array;
  s?: StaticKey;
  rs?: Uint8Array; // the responder's static key, for IK and X
  psk?: Uint8Array; // 32 bytes; a responder may set it later (setPsk)
  /** Ephemeral private keys to use instead of random ones, in order (tests). */
  ephemeral?: Uint8Array;
}

/** The outcome of the last message: the transport CipherStates (send, receive). */
export interface Done {
  send: CipherState;
  recv: CipherState;
}

export class HandshakeState {
  readonly ss: SymmetricState;
  private readonly s?: StaticKey;
  private e?: BytesKey;
  rs?: Uint8Array;
  private re?: Uint8Array;
  private psk?: Uint8Array;
  private readonly initiator: boolean;
  private readonly pattern: Pattern;
  private readonly fixedE?: Uint8Array;
  private msg = 0;

  constructor(c: HandshakeConfig) {
    this.pattern = c.pattern;
    this.initiator = c.initiator;
    this.s = c.s;
    this.rs = c.rs;
    this.fixedE = c.ephemeral;
    if (c.psk) this.setPsk(c.psk);
    this.ss = new SymmetricState(`Noise_${c.pattern.name}_25519_ChaChaPoly_SHA256`);
    this.ss.mixHash(c.prologue);
    if (c.pattern.preResponder === 's') {
      const pub = c.initiator ? c.rs : c.s?.publicKey;
      if (!pub || pub.length !== DHLEN) throw new Error(`Noise_${c.pattern.name} needs the responder's static key`);
      this.ss.mixHash(pub);
    }
  }

  setPsk(psk: Uint8Array): void {
    if (psk.length !== 32) throw new Error(`a Noise PSK is 32 bytes, not ${psk.length}`);
    this.psk = psk;
  }

  /** The peer's static key, once a message carried (or the pre-message gave) it. */
  remoteStatic(): Uint8Array | undefined {
    return this.rs;
  }

  /** Whether the next message is this side's to write. */
  myTurn(): boolean {
    return (this.msg % 2 === 0) === this.initiator;
  }

  private tokens(writing: boolean): Token[] {
    if (this.msg >= this.pattern.messages.length) throw new Error('noise: no handshake messages left');
    if (this.myTurn() !== writing) throw new Error(writing ? 'noise: it is the peer\'s turn to write' : 'noise: it is this side\'s turn to write');
    return this.pattern.messages[this.msg];
  }

  /** The DH of an ee/es/se/ss token, from this side's point of view. */
  private async dh(t: 'ee' | 'es' | 'se' | 'ss'): Promise<Uint8Array> {
    // The first letter is the initiator's key, the second the responder's.
    const [mine, theirs] = this.initiator ? [t[0], t[1]] : [t[1], t[0]];
    const pub = theirs === 'e' ? this.re : this.rs;
    if (!pub) throw new Error(`noise: no remote ${theirs} for ${t}`);
    if (mine === 'e') {
      if (!this.e) throw new Error(`noise: no local e for ${t}`);
      return this.e.dhSync(pub);
    }
    if (!this.s) throw new Error(`noise: no local s for ${t}`);
    return this.s.dh(pub);
  }

  private done(): Done | undefined {
    if (++this.msg < this.pattern.messages.length) return undefined;
    const [c1, c2] = this.ss.split();
    return this.initiator ? { send: c1, recv: c2 } : { send: c2, recv: c1 };
  }

  /** WriteMessage(payload): the message, and the transport ciphers after the last one. */
  async writeMessage(payload: Uint8Array): Promise<{ message: Uint8Array; done?: Done }> {
    const out: Uint8Array[] = [];
    for (const t of this.tokens(true)) {
      switch (t) {
        case 'e':
          this.e = BytesKey.generate(this.fixedE);
          out.push(this.e.publicKey);
          this.ss.mixHash(this.e.publicKey);
          if (this.pattern.psk) this.ss.mixKey(this.e.publicKey);
          break;
        case 's':
          if (!this.s) throw new Error('noise: no local static key');
          out.push(this.ss.encryptAndHash(this.s.publicKey));
          break;
        case 'psk':
          if (!this.psk) throw new Error('noise: no PSK');
          this.ss.mixKeyAndHash(this.psk);
          break;
        default:
          this.ss.mixKey(await this.dh(t));
      }
    }
    out.push(this.ss.encryptAndHash(payload));
    const message = concat(...out);
    if (message.length > MAX_MSG) throw new Error(`noise: a handshake message of ${message.length} bytes is over the limit of ${MAX_MSG}`);
    return { message, done: this.done() };
  }

  /** ReadMessage(message): the payload, and the transport ciphers after the last one. Throws if it does not authenticate. */
  async readMessage(message: Uint8Array): Promise<{ payload: Uint8Array; done?: Done }> {
    if (message.length > MAX_MSG) throw new Error(`noise: a handshake message of ${message.length} bytes is over the limit of ${MAX_MSG}`);
    let m = message;
    const take = (n: number): Uint8Array => {
      if (m.length < n) throw new Error('noise: message is too short');
      const b = m.subarray(0, n);
      m = m.subarray(n);
      return b;
    };
    for (const t of this.tokens(false)) {
      switch (t) {
        case 'e':
          this.re = take(DHLEN).slice();
          this.ss.mixHash(this.re);
          if (this.pattern.psk) this.ss.mixKey(this.re);
          break;
        case 's':
          if (this.rs) throw new Error('noise: the remote static key is already known');
          this.rs = this.ss.decryptAndHash(take(DHLEN + (this.ss.cs.hasKey() ? TAGLEN : 0))).slice();
          break;
        case 'psk':
          if (!this.psk) throw new Error('noise: no PSK');
          this.ss.mixKeyAndHash(this.psk);
          break;
        default:
          this.ss.mixKey(await this.dh(t));
      }
    }
    const payload = this.ss.decryptAndHash(m);
    return { payload, done: this.done() };
  }
}
