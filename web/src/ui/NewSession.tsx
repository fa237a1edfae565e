import { useEffect, useRef, useState } from 'preact/hooks';
import { get, newKey, post, q } from '../api';
import { echoUser, errText, putSession } from '../store';
import { go, href } from '../router';
import { ACP_PROVIDER, DEFAULT_PROVIDER, PROVIDERS, providerLabel } from '../providers';
import type { DirValidation, Dirs, FileAttachment, Session } from '../types';
import { Attachments, ErrorBox, readImages, Spinner, TopBar } from './common';
import { appendText, useVoice } from './VoiceButton';

const MODELS = ['', 'opus', 'sonnet', 'haiku'];
const MODES: [string, string][] = [
  ['default', 'Ask before acting (default)'],
  ['acceptEdits', 'Accept edits'],
  ['plan', 'Plan only'],
  ['bypassPermissions', 'Bypass permissions'],
];

export function NewSession({ machine }: { machine: string }) {
  const [cwd, setCwd] = useState(() => localStorage.getItem('betcode.lastCwd') || '');
  const [model, setModel] = useState('');
  const [mode, setMode] = useState('default');
  const [provider, setProvider] = useState(DEFAULT_PROVIDER);
  const [acpAgent, setAcpAgent] = useState('');
  const [name, setName] = useState('');
  const [prompt, setPrompt] = useState('');
  const voice = useVoice((t) => setPrompt((p) => appendText(p, t)), 'the prompt');
  const [files, setFiles] = useState<FileAttachment[]>([]);
  const [valid, setValid] = useState<DirValidation | null>(null);
  const [browse, setBrowse] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const key = useRef(newKey());

  useEffect(() => {
    if (!cwd.trim()) {
      setValid(null);
      return;
    }
    const t = setTimeout(() => {
      get<DirValidation>(`/dirs/validate?path=${q(cwd.trim())}`).then(setValid, () => setValid(null));
    }, 350);
    return () => clearTimeout(t);
  }, [cwd]);

  const attach = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    try {
      if (input.files?.length) setFiles([...files, ...(await readImages(input.files, files))]);
    } catch (err) {
      setError(errText(err));
    }
    input.value = '';
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    if (!cwd.trim()) {
      setError('Choose a directory');
      return;
    }
    setBusy(true);
    try {
      const body: Record<string, unknown> = { cwd: cwd.trim(), idempotencyKey: key.current };
      if (name.trim()) body.name = name.trim();
      if (model.trim()) body.model = model.trim();
      if (mode !== 'default') body.permissionMode = mode;
      // Sent only when chosen, so that a server from before providers takes the default form.
      if (provider !== DEFAULT_PROVIDER) body.provider = provider;
      if (provider === ACP_PROVIDER && acpAgent.trim()) body.providerConfig = { agent: acpAgent.trim() };
      if (prompt.trim()) body.prompt = prompt;
      if (files.length) body.files = files;
      const s = await post<Session>('/sessions', body);
      try {
        localStorage.setItem('betcode.lastCwd', cwd.trim());
      } catch {
        /* ignore */
      }
      putSession(s);
      if (prompt.trim()) echoUser(s.id, prompt);
      go(href.conv(machine, s.id));
    } catch (err) {
      setError(errText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <TopBar title="New session" back={href.sessions(machine)} backLabel="Sessions" />
      <main class="page narrow" id="main">
        <form class="stack" onSubmit={submit}>
          <label for="cwd">Directory</label>
          <div class="input-row">
            <input
              id="cwd"
              data-testid="cwd-input"
              value={cwd}
              placeholder="/home/me/project"
              autocapitalize="off"
              spellcheck={false}
              onInput={(e) => setCwd((e.target as HTMLInputElement).value)}
              aria-describedby="cwd-state"
              aria-invalid={valid ? !valid.valid : undefined}
            />
            <button type="button" class="btn" aria-expanded={browse} aria-controls="dir-browser" onClick={() => setBrowse(!browse)}>
              Browse
            </button>
          </div>
          <p id="cwd-state" class={'small ' + (valid && !valid.valid ? 'error' : 'muted')} aria-live="polite">
            {valid ? (valid.valid ? (valid.isGitRepo ? 'Git repository' : 'Directory (not a git repository)') : valid.error || 'Not a directory') : ''}
          </p>
          {browse && <DirBrowser start={cwd} onPick={(p) => { setCwd(p); setBrowse(false); }} />}

          <label for="name">Name (optional)</label>
          <input id="name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />

          <label for="provider">Provider</label>
          <select id="provider" data-testid="provider-select" value={provider} onChange={(e) => setProvider((e.target as HTMLSelectElement).value)}>
            {PROVIDERS.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
          </select>
          {provider === ACP_PROVIDER && (
            <>
              <label for="acp-agent">Agent (optional when the machine has one)</label>
              <input id="acp-agent" data-testid="acp-agent-input" value={acpAgent} placeholder="gemini" autocapitalize="off" spellcheck={false} onInput={(e) => setAcpAgent((e.target as HTMLInputElement).value)} />
            </>
          )}

          <div class="grid2">
            <div class="stack">
              <label for="model">Model</label>
              <input id="model" list="models" value={model} placeholder="default" onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
              <datalist id="models">{MODELS.filter(Boolean).map((m) => <option key={m} value={m} />)}</datalist>
            </div>
            <div class="stack">
              <label for="mode">Permission mode</label>
              <select id="mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
                {MODES.map(([v, l]) => <option key={v} value={v}>{l}</option>)}
              </select>
            </div>
          </div>

          <label for="prompt">Prompt</label>
          <div class="voice-row">
            <textarea id="prompt" rows={5} data-testid="prompt-input" value={prompt} placeholder={`What should ${provider === DEFAULT_PROVIDER ? 'Claude' : providerLabel(provider)} do?`} onInput={(e) => setPrompt((e.target as HTMLTextAreaElement).value)} />
            {voice.button}
          </div>
          {voice.status}

          <Attachments files={files} onRemove={(i) => setFiles(files.filter((_, j) => j !== i))} />
          <div class="toolbar">
            <label class="btn file-btn">
              Attach image
              <input type="file" accept="image/*" multiple class="visually-hidden-file" onChange={attach} aria-label="Attach image from gallery" />
            </label>
            <label class="btn file-btn">
              Take photo
              <input type="file" accept="image/*" capture="environment" class="visually-hidden-file" onChange={attach} aria-label="Take a photo" />
            </label>
          </div>
          <ErrorBox error={error} />
          <button type="submit" class="btn primary" data-testid="start-session" disabled={busy}>
            {busy ? 'Starting…' : 'Start session'}
          </button>
        </form>
      </main>
    </>
  );
}

function DirBrowser(p: { start: string; onPick: (path: string) => void }) {
  const [d, setD] = useState<Dirs | null>(null);
  const [error, setError] = useState('');
  const load = (path: string) => {
    setError('');
    get<Dirs>(`/dirs${path ? `?path=${q(path)}` : ''}`).then(setD, (e) => setError(errText(e)));
  };
  useEffect(() => load(p.start.trim()), []);
  const entries = d?.entries ?? (d?.directories || []).map((x) => ({ name: x.split('/').pop() || x, path: x.includes('/') ? x : `${d!.path.replace(/\/$/, '')}/${x}`, isGitRepo: false }));
  return (
    <div id="dir-browser" class="card dirs" role="group" aria-label="Directory browser">
      <ErrorBox error={error} />
      {!d && !error && <Spinner />}
      {d && (
        <>
          <div class="toolbar">
            <code class="grow ellipsis">{d.path}</code>
            <button type="button" class="btn primary" onClick={() => p.onPick(d.path)}>Use this directory</button>
          </div>
          <ul class="list compact" aria-label={`Directories in ${d.path}`}>
            {d.parent && d.parent !== d.path && (
              <li><button type="button" class="row" onClick={() => load(d.parent)}>.. (up)</button></li>
            )}
            {entries.map((e) => (
              <li key={e.path}>
                <button type="button" class="row" onClick={() => load(e.path)}>
                  <span aria-hidden="true">📁</span> <span class="sr-only">Open</span> <span class="grow">{e.name}</span>{' '}
                  {e.isGitRepo && <span class="chip">git<span class="sr-only"> repository</span></span>}
                </button>
              </li>
            ))}
          </ul>
          {d.truncated && <p class="muted small">Some directories are not shown.</p>}
        </>
      )}
    </div>
  );
}
