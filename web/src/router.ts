// Hash routes: #/login, #/pair, #/machines, #/settings, #/inbox, #/m/{machine}, #/m/{machine}/new,
// #/m/{machine}/local, #/m/{machine}/s/{session}, #/m/{machine}/s/{session}/changes.
// (Push notifications open "/#/m/{machine}/s/{session}".)

import { useEffect, useState } from 'preact/hooks';

export interface Route { name: string; machine?: string; session?: string }

export function parse(hash: string): Route {
  const p = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (p[0] === 'login') return { name: 'login' };
  if (p[0] === 'machines') return { name: 'machines' };
  if (p[0] === 'pair') return { name: 'pair' };
  if (p[0] === 'settings') return { name: 'settings' };
  if (p[0] === 'inbox') return { name: 'inbox' };
  if (p[0] === 'm' && p[1]) {
    const machine = p[1];
    if (!p[2]) return { name: 'sessions', machine };
    if (p[2] === 'new') return { name: 'new', machine };
    if (p[2] === 'local') return { name: 'local', machine };
    if (p[2] === 's' && p[3]) return { name: p[4] === 'changes' ? 'changes' : 'conversation', machine, session: p[3] };
  }
  return { name: 'home' };
}

export const href = {
  machines: () => '#/machines',
  pair: () => '#/pair',
  login: () => '#/login',
  settings: () => '#/settings',
  inbox: () => '#/inbox',
  sessions: (m: string) => `#/m/${encodeURIComponent(m)}`,
  newSession: (m: string) => `#/m/${encodeURIComponent(m)}/new`,
  local: (m: string) => `#/m/${encodeURIComponent(m)}/local`,
  conv: (m: string, s: string) => `#/m/${encodeURIComponent(m)}/s/${encodeURIComponent(s)}`,
  changes: (m: string, s: string) => `#/m/${encodeURIComponent(m)}/s/${encodeURIComponent(s)}/changes`,
};

export function useRoute(): Route {
  const [r, set] = useState(() => parse(location.hash));
  useEffect(() => {
    const f = () => set(parse(location.hash));
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return r;
}

export function go(h: string) {
  if (location.hash !== h) location.hash = h;
}
