import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { hasAccess, state, useAppState, useMachine } from '../store';
import { go, href, parse, useRoute } from '../router';
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
    const machine = parse(location.hash).machine;
    if (hasAccess() && machine && machine !== state.machineId) void useMachine(machine, false);
  }, [r.machine, access]);

  // On a relay with nothing paired and no login, pairing comes first; the relay login stays for
  // machines that run --relay-e2e=optional.
  // Everything is read now, when the effect runs, not taken from the render that scheduled it:
  // effects run after the paint, and boot may have finished in between (a render before the
  // pairings were read saw no access; acting on that after boot sent a paired device to #/pair).
  useEffect(() => {
    if (!state.booted) return;
    const access = hasAccess();
    const relay = state.info?.role !== 'agent';
    const route = parse(location.hash);
    if (!access && route.name !== 'login' && route.name !== 'pair') go(relay && state.info ? href.pair() : href.login());
    else if (access && (route.name === 'home' || (route.name === 'login' && state.token) || (route.name === 'pair' && !relay)))
      go(inboxHome() ? href.inbox() : state.machineId ? href.sessions(state.machineId) : href.machines());
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
