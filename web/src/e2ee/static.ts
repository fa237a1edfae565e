// A stored DeviceKey as Noise's static key: WebCrypto's deriveBits or noble's x25519.
import type { DeviceKey } from './keys';
import { BytesKey, WebCryptoKey, type StaticKey } from './noise';

export function staticKey(k: DeviceKey): StaticKey {
  if (k.privateKey) return new WebCryptoKey(k.privateKey, k.publicKey);
  if (k.private) {
    const b = new BytesKey(k.private);
    if (b.publicKey.some((x, i) => x !== k.publicKey[i])) throw new Error('the device key\'s halves do not match');
    return b;
  }
  throw new Error('the device key has no private half');
}
