import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { hasAccess, state, useAppState, useMachine } from '../store';
import { go, href, useRoute } from '../router';
import { Changes } from './Changes';
import { ConnBanner, Spinner, Toast } from './common';
import { Conversation } from './Conversation';
import { Inbox } from './Inbox';
import { LiveStrip } from './Live';
import { inboxHome } from '../inbox';
import { Login } from './Login';
import { Machines } from './Machines';
import { NewSession } from './NewSession';
import { LocalSessions, Sessions } from './Sessions';
import { Settings } from './Settings';

/** The pairing screen (camera, QR reader, the pairing code's parser) loads when first shown. */
let PairScreen: ComponentType | undefined;
function LazyPair() {
  const [C, setC] = useState(() => PairScreen);
  useEffect(() => {
    if (!C) void import('./Pair').then((m) => {
      PairScreen = m.Pair;
      setC(() => m.Pair);
    });
  }, []);
  return C ? <C /> : <main class="page" id="main"><Spinner label="Loading" /></main>;
}

/** The skip link focuses the main content: following "#main" would change the hash route. */
function skipToMain(e: Event) {
  e.preventDefault();
  const main = document.getElementById('main');
  if (!main) return;
  main.tabIndex = -1;
  main.focus();
}

export function App() {
  const s = useAppState();
  const r = useRoute();

  // A route naming another machine (a link from a push notification) makes it the current one.
  const access = hasAccess();
  const relay = s.info?.role !== 'agent';
  useEffect(() => {
    if (access && r.machine && r.machine !== state.machineId) void useMachine(r.machine, false);
  }, [r.machine, access]);

  // On a relay with nothing paired and no login, pairing comes first; the relay login stays for
  // machines that run --relay-e2e=optional.
  useEffect(() => {
    if (!s.booted) return;
    if (!access && r.name !== 'login' && r.name !== 'pair') go(relay && s.info ? href.pair() : href.login());
    else if (access && (r.name === 'home' || (r.name === 'login' && s.token) || (r.name === 'pair' && !relay)))
      go(inboxHome() ? href.inbox() : s.machineId ? href.sessions(s.machineId) : href.machines());
  }, [s.booted, access, s.token, r.name, relay, !!s.info]);

  let page;
  if (!s.booted) page = <main class="page"><Spinner /></main>;
  else if (r.name === 'pair' && relay) page = <LazyPair />;
  else if (!access || r.name === 'login') page = <Login />;
  else if (r.name === 'machines') page = <Machines />;
  else if (r.name === 'settings') page = <Settings />;
  else if (r.name === 'inbox') page = <Inbox />;
  else if (r.machine && r.machine !== s.machineId) page = <main class="page"><Spinner /></main>;
  else if (r.name === 'sessions') page = <Sessions machine={r.machine!} />;
  else if (r.name === 'new') page = <NewSession machine={r.machine!} />;
  else if (r.name === 'local') page = <LocalSessions machine={r.machine!} />;
  else if (r.name === 'conversation') page = <Conversation key={r.session} machine={r.machine!} session={r.session!} />;
  else if (r.name === 'changes') page = <Changes machine={r.machine!} session={r.session!} />;
  else page = <main class="page"><Spinner /></main>;

  return (
    <>
      <a class="skip" href="#main" onClick={skipToMain}>Skip to content</a>
      <ConnBanner />
      <LiveStrip />
      {page}
      <Toast />
    </>
  );
}
