// A tiny IndexedDB key-value store. The token lives here (not in a cookie, not in the URL)
// because the service worker needs it to answer permission requests from a notification;
// sw/sw.js opens the same database ("betcode", store "kv").

const DB = 'betcode';
const STORE = 'kv';
let dbp: Promise<IDBDatabase> | undefined;

function db(): Promise<IDBDatabase> {
  if (!dbp) {
    dbp = new Promise((resolve, reject) => {
      const r = indexedDB.open(DB, 1);
      r.onupgradeneeded = () => r.result.createObjectStore(STORE);
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    });
    dbp.catch(() => (dbp = undefined));
  }
  return dbp;
}

function run<T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest): Promise<T> {
  return db().then(
    (d) =>
      new Promise<T>((resolve, reject) => {
        const tx = d.transaction(STORE, mode);
        const r = f(tx.objectStore(STORE));
        tx.oncomplete = () => resolve(r.result as T);
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error);
      }),
  );
}

export const idbGet = <T>(key: string) => run<T | undefined>('readonly', (s) => s.get(key));
export const idbSet = (key: string, value: unknown) => run<void>('readwrite', (s) => s.put(value, key));
export const idbDel = (key: string) => run<void>('readwrite', (s) => s.delete(key));
