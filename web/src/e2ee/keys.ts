// The device's static X25519 key and its pairings, in IndexedDB ("betcode" db, "kv" store;
// docs/e2ee-wire.md §5). Where the browser has WebCrypto X25519 the private key is a
// non-extractable CryptoKey that script can use but never read; else it is 32 bytes.
import { idbDel, idbGet, idbSet } from '../idb';
import type { Pairing } from './types';

/** A device key as stored: publicKey always, and privateKey (WebCrypto) or private (bytes). */
export interface DeviceKey {
  publicKey: Uint8Array;
  privateKey?: CryptoKey;
  private?: Uint8Array;
}

const DEVICE_KEY = 'device-key';
const PAIRINGS = 'pairings';
const CURRENT = 'current-machine';

/** The key-value store: IndexedDB, or a test's. */
export interface KV {
  get<T>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
  del(key: string): Promise<void>;
}
let kv: KV = { get: idbGet, set: idbSet, del: idbDel };

/** Replaces the store (tests). */
export function useStore(s: KV): void {
  kv = s;
}

/** Runs f under a lock shared by this origin's tabs and workers, where the browser has Web Locks. */
function locked<T>(name: string, f: () => Promise<T>): Promise<T> {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  return locks ? (locks.request(name, f) as Promise<T>) : f();
}

/** A new key: WebCrypto X25519 (non-extractable) where available, else @noble/curves. */
export async function generateDeviceKey(): Promise<DeviceKey> {
  try {
    const k = (await crypto.subtle.generateKey({ name: 'X25519' }, false, ['deriveBits'])) as CryptoKeyPair;
    const publicKey = new Uint8Array(await crypto.subtle.exportKey('raw', k.publicKey));
    return { privateKey: k.privateKey, publicKey };
  } catch {
    const { x25519 } = await import('@noble/curves/ed25519.js');
    const { secretKey, publicKey } = x25519.keygen();
    return { private: secretKey, publicKey };
  }
}

function usable(k: DeviceKey | undefined): k is DeviceKey {
  return !!k && k.publicKey instanceof Uint8Array && k.publicKey.length === 32 &&
    (k.privateKey !== undefined || (k.private instanceof Uint8Array && k.private.length === 32));
}

/** This device's key, created and stored on first use. */
export function loadOrCreateDeviceKey(): Promise<DeviceKey> {
  return locked('betcode-device-key', async () => {
    const old = await kv.get<DeviceKey>(DEVICE_KEY);
    if (usable(old)) return old;
    const k = await generateDeviceKey();
    await kv.set(DEVICE_KEY, k);
    return k;
  });
}

/** The machines this device paired with. */
export async function listPairings(): Promise<Pairing[]> {
  const p = await kv.get<Pairing[]>(PAIRINGS);
  return Array.isArray(p) ? p : [];
}

export async function getPairing(machineId: string): Promise<Pairing | undefined> {
  return (await listPairings()).find((p) => p.machineId === machineId);
}

/** Adds p, or replaces the pairing with the same machine. */
export function savePairing(p: Pairing): Promise<void> {
  return locked('betcode-pairings', async () => {
    const all = (await listPairings()).filter((x) => x.machineId !== p.machineId);
    all.push(p);
    await kv.set(PAIRINGS, all);
  });
}

export function removePairing(machineId: string): Promise<void> {
  return locked('betcode-pairings', async () => {
    await kv.set(PAIRINGS, (await listPairings()).filter((x) => x.machineId !== machineId));
  });
}

export const getCurrentMachine = (): Promise<string | undefined> => kv.get<string>(CURRENT);

export const setCurrentMachine = (id: string | undefined): Promise<void> => (id ? kv.set(CURRENT, id) : kv.del(CURRENT));
