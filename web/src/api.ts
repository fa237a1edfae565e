// REST client of docs/web-api.md: bearer token and X-Betcode-Machine on every call; or, for a
// machine this device paired with (served by a relay), the machine's end-to-end channel
// (docs/e2ee-wire.md §2): setChannel routes every machine call through it.

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

/** Sends one REST call of a machine through its end-to-end channel: {status, body (JSON text)}. */
export type ChannelCall = (method: string, path: string, body: string | undefined, signal?: AbortSignal) => Promise<{ status: number; body: string }>;
let channel: ChannelCall | undefined;

/** Routes machine calls through f (the current machine's channel), or back to fetch (undefined). */
export function setChannel(f: ChannelCall | undefined) {
  channel = f;
}

/** Calls of the relay itself, never of a machine: they stay plain HTTPS with the relay token. */
export function isRelayPath(path: string): boolean {
  return /^\/(me|info|health|openapi\.json|machines|oidc)(\/|\?|$)/.test(path) || /^\/push(\?|$|\/test)/.test(path);
}

export interface CallOpts { token?: string; machine?: string | null; signal?: AbortSignal }

export async function api<T>(method: string, path: string, body?: unknown, o: CallOpts = {}): Promise<T> {
  if (channel && o.machine !== null && o.token === undefined && !isRelayPath(path)) return viaChannel<T>(channel, method, path, body, o.signal);
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
  const text = res.status === 204 ? '' : await res.text();
  if (res.status === 401 && token === auth.token && token) onUnauthorized();
  return decode<T>(res.status, text, res.statusText);
}

/** Decodes an answer as fetch's would be: JSON, or an ApiError for a status over 299. */
function decode<T>(status: number, text: string, statusText: string): T {
  if (status === 204) return undefined as T;
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (status < 200 || status > 299) {
    const d = (data ?? {}) as { error?: string; code?: string };
    throw new ApiError(status, d.code || 'HTTP_' + status, d.error || statusText || 'Request failed');
  }
  return data as T;
}

async function viaChannel<T>(f: ChannelCall, method: string, path: string, body: unknown, signal?: AbortSignal): Promise<T> {
  let a: { status: number; body: string };
  try {
    a = await f(method, path, body === undefined ? undefined : JSON.stringify(body), signal);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    const c = e as { code?: string; message?: string };
    throw new ApiError(0, c.code || 'NETWORK', c.message || 'The machine cannot be reached');
  }
  return decode<T>(a.status, a.body, '');
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
