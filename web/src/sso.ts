// Single sign-on through the relay (docs/web-api.md "Single sign-on"): the relay runs the OAuth 2.0
// device flow with its identity provider; the app shows the code and polls until a token arrives.
import { post } from './api';

/** The answer of POST /api/oidc/device. */
export interface DeviceStart {
  flow: string;
  userCode: string;
  verificationUri: string;
  verificationUriComplete?: string;
  interval: number;
  expiresIn: number;
}

/** An answer of POST /api/oidc/device/poll: a status (202) or the token (200). */
export interface DevicePoll {
  status?: 'pending' | 'slow_down';
  interval?: number;
  token?: string;
  userId?: string;
}

// Both calls are open: no token, no machine.
const open = (signal?: AbortSignal) => ({ token: '', machine: null, signal });

/** Starts a sign-in at the relay. */
export const startSSO = (signal?: AbortSignal) => post<DeviceStart>('/oidc/device', {}, open(signal));

const pollOnce = (flow: string, signal?: AbortSignal) => post<DevicePoll>('/oidc/device/poll', { flow }, open(signal));

/** Resolves after ms, or rejects with an AbortError when signal aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const abort = () => {
      clearTimeout(t);
      reject(new DOMException('Aborted', 'AbortError'));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * Polls flow d every interval seconds (as the relay says; 5 s more after each slow_down without one)
 * until the relay answers a token, which it returns. It rejects with the relay's ApiError (403
 * ACCESS_DENIED, 410 EXPIRED_TOKEN, …) or an AbortError.
 */
export async function pollSSO(
  d: DeviceStart,
  signal?: AbortSignal,
  poll: (flow: string, signal?: AbortSignal) => Promise<DevicePoll> = pollOnce,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void> = delay,
): Promise<string> {
  let iv = Math.max(1, d.interval || 5);
  for (;;) {
    await sleep(iv * 1000, signal);
    const r = await poll(d.flow, signal);
    if (r.token) return r.token;
    if (r.interval && r.interval > 0) iv = r.interval;
    else if (r.status === 'slow_down') iv += 5;
  }
}
