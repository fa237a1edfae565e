import { render } from 'preact';
import { boot, changed, saveConvs, state, streamState, wake } from './store';
import { App } from './ui/App';
import { feedSynthetic, startInbox } from './inbox';
import './styles.css';

const root = document.getElementById('app')!;
root.textContent = ''; // the static "Loading…" of index.html
render(<App />, root);
void boot();
startInbox();
// The inbox's benchmark feeds it synthetic machines (web/e2e/inbox.mjs, docs/benchmarks.md).
(globalThis as { betcodeInboxFeed?: typeof feedSynthetic }).betcodeInboxFeed = feedSynthetic;
// A failed browser test reports the stream's state (web/e2e/lib/harness.mjs).
(globalThis as { betcodeStreamState?: typeof streamState }).betcodeStreamState = streamState;

// Phone wake and network return: reconnect at once instead of waiting for the backoff.
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') wake();
  else saveConvs();
});
addEventListener('online', () => {
  state.online = true;
  changed();
  wake();
});
addEventListener('offline', () => {
  state.online = false;
  changed();
});
addEventListener('pagehide', saveConvs);
matchMedia('(prefers-color-scheme: dark)').addEventListener?.('change', () => changed());

if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch(() => {});
}
