import { useEffect, useState } from 'preact/hooks';
import { get, q } from '../api';
import { parseUnified } from '../diff';
import { errText, useAppState } from '../store';
import { href } from '../router';
import type { Changes as ChangesT, FileDiff } from '../types';
import { ErrorBox, Spinner, TopBar } from './common';
import { DiffView } from './Conversation';

export function Changes({ machine, session }: { machine: string; session: string }) {
  useAppState();
  const [ch, setCh] = useState<ChangesT | null>(null);
  const [error, setError] = useState('');
  const [open, setOpen] = useState('');
  const [diff, setDiff] = useState<FileDiff | null>(null);
  const [diffErr, setDiffErr] = useState('');
  const load = () => {
    setError('');
    get<ChangesT>(`/sessions/${q(session)}/changes`).then(setCh, (e) => setError(errText(e)));
  };
  useEffect(load, [session]);
  const show = (path: string) => {
    if (open === path) {
      setOpen('');
      return;
    }
    setOpen(path);
    setDiff(null);
    setDiffErr('');
    get<FileDiff>(`/sessions/${q(session)}/diff?path=${q(path)}`).then(setDiff, (e) => setDiffErr(errText(e)));
  };
  return (
    <>
      <TopBar title="Changes" back={href.conv(machine, session)} backLabel="Conversation">
        <button type="button" class="btn small-btn" onClick={load}>Refresh</button>
      </TopBar>
      <main class="page" id="main">
        <ErrorBox error={error} />
        {!ch && !error && <Spinner label="Loading changes" />}
        {ch && !ch.isGitRepo && <p class="muted">The session’s directory is not a git repository.</p>}
        {ch && ch.isGitRepo && (
          <p class="muted small">
            {ch.branch ? `On ${ch.branch}` : 'Detached HEAD'} · <code>{ch.root}</code> · {ch.files.length} file{ch.files.length === 1 ? '' : 's'} changed
          </p>
        )}
        {ch?.isGitRepo && !ch.files.length && <p class="muted">No uncommitted change.</p>}
        <ul class="list" aria-label="Changed files">
          {(ch?.files || []).map((f) => (
            <li key={f.path}>
              <button type="button" class="row" aria-expanded={open === f.path} onClick={() => show(f.path)}>
                <span class={'chip fs-' + f.status}>{f.status}</span>
                <span class="grow ellipsis">
                  {f.oldPath ? `${f.oldPath} → ` : ''}
                  {f.path}
                </span>
                {f.binary ? <span class="muted small">binary</span> : (
                  <span class="small"><span class="plus">+{f.additions}</span> <span class="minus">−{f.deletions}</span></span>
                )}
                {f.staged && <span class="chip">staged</span>}
              </button>
              {open === f.path && (
                <div class="diff-box">
                  <ErrorBox error={diffErr} />
                  {!diff && !diffErr && <Spinner label="Loading the diff" />}
                  {diff && diff.binary && <p class="muted">Binary file.</p>}
                  {diff && !diff.binary && <DiffView lines={parseUnified(diff.diff)} label={`Diff of ${f.path}`} />}
                  {diff?.truncated && <p class="muted small">The diff was truncated.</p>}
                </div>
              )}
            </li>
          ))}
        </ul>
        {ch?.truncated && <p class="muted small">More files changed than are shown.</p>}
      </main>
    </>
  );
}
