// REST client of docs/web-api.md: bearer token and X-Betcode-Machine on every call.

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

const auth = { token: '', machine: '' };
let onUnauthorized: () => void = () => {};

export function setAuth(token: string, machine: string) {
  auth.token = token;
  auth.machine = machine;
}
export function setUnauthorizedHandler(f: () => void) {
  onUnauthorized = f;
}

export interface CallOpts { token?: string; machine?: string | null; signal?: AbortSignal }

export async function api<T>(method: string, path: string, body?: unknown, o: CallOpts = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  const token = o.token ?? auth.token;
  if (token) headers.Authorization = 'Bearer ' + token;
  const machine = o.machine === null ? '' : (o.machine ?? auth.machine);
  if (machine) headers['X-Betcode-Machine'] = machine;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch('/api' + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      signal: o.signal,
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, 'NETWORK', 'The server cannot be reached');
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!res.ok) {
    const d = (data ?? {}) as { error?: string; code?: string };
    const err = new ApiError(res.status, d.code || 'HTTP_' + res.status, d.error || res.statusText || 'Request failed');
    if (res.status === 401 && token === auth.token && token) onUnauthorized();
    throw err;
  }
  return data as T;
}

export const get = <T>(path: string, o?: CallOpts) => api<T>('GET', path, undefined, o);
export const post = <T>(path: string, body?: unknown, o?: CallOpts) => api<T>('POST', path, body ?? {}, o);
export const del = (path: string) => api<void>('DELETE', path);
export const patch = <T>(path: string, body: unknown, o?: CallOpts) => api<T>('PATCH', path, body, o);
export const q = encodeURIComponent;

export function newKey(): string {
  const c = globalThis.crypto;
  if (c?.randomUUID) return c.randomUUID();
  const b = new Uint8Array(16);
  c.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
