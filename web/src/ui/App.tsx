import { useEffect } from 'preact/hooks';
import { state, useAppState, useMachine } from '../store';
import { go, href, useRoute } from '../router';
import { Changes } from './Changes';
import { ConnBanner, Spinner, Toast } from './common';
import { Conversation } from './Conversation';
import { Login } from './Login';
import { Machines } from './Machines';
import { NewSession } from './NewSession';
import { LocalSessions, Sessions } from './Sessions';
import { Settings } from './Settings';

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
  useEffect(() => {
    if (s.token && r.machine && r.machine !== state.machineId) void useMachine(r.machine, false);
  }, [r.machine, s.token]);

  useEffect(() => {
    if (!s.booted) return;
    if (!s.token && r.name !== 'login') go('#/login');
    else if (s.token && (r.name === 'home' || r.name === 'login')) go(s.machineId ? href.sessions(s.machineId) : href.machines());
  }, [s.booted, s.token, r.name]);

  let page;
  if (!s.booted) page = <main class="page"><Spinner /></main>;
  else if (!s.token || r.name === 'login') page = <Login />;
  else if (r.name === 'machines') page = <Machines />;
  else if (r.name === 'settings') page = <Settings />;
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
      {page}
      <Toast />
    </>
  );
}
