import type { ComponentChildren } from 'preact';
import { applyTheme, hasAccess, paired, useAppState, type Theme } from '../store';
import { href } from '../router';
import type { Session } from '../types';

export function TopBar(p: { title: string; back?: string; backLabel?: string; children?: ComponentChildren }) {
  return (
    <header class="topbar">
      {p.back ? (
        <a class="icon-btn" href={p.back} aria-label={p.backLabel || 'Back'}>
          <svg viewBox="0 0 24 24" aria-hidden="true"><path d="M15 5l-7 7 7 7" /></svg>
        </a>
      ) : (
        <span class="logo" aria-hidden="true">▲</span>
      )}
      <h1 class="title">{p.title}</h1>
      <div class="actions">
        {p.children}
        <ThemeToggle />
        {hasAccess() && (
          <a class="icon-btn" href={href.settings()} aria-label="Settings" data-testid="settings">
            <svg viewBox="0 0 24 24" aria-hidden="true">
              <circle cx="12" cy="12" r="3" />
              <path d="M12 2v3M12 19v3M2 12h3M19 12h3M4.9 4.9l2.1 2.1M17 17l2.1 2.1M4.9 19.1L7 17M17 7l2.1-2.1" />
            </svg>
          </a>
        )}
      </div>
    </header>
  );
}

const NEXT: Record<Theme, Theme> = { system: 'light', light: 'dark', dark: 'system' };

export function ThemeToggle() {
  const s = useAppState();
  return (
    <button
      type="button"
      class="icon-btn"
      data-testid="theme-toggle"
      aria-label={`Theme: ${s.theme}. Switch to ${NEXT[s.theme]}`}
      title={`Theme: ${s.theme}`}
      onClick={() => applyTheme(NEXT[s.theme])}
    >
      <svg viewBox="0 0 24 24" aria-hidden="true">
        {s.theme === 'dark' ? (
          <path d="M20 14.5A8 8 0 019.5 4 8 8 0 1020 14.5z" />
        ) : s.theme === 'light' ? (
          <g><circle cx="12" cy="12" r="4" /><path d="M12 2v2M12 20v2M2 12h2M20 12h2M5 5l1.5 1.5M17.5 17.5L19 19M5 19l1.5-1.5M17.5 6.5L19 5" /></g>
        ) : (
          <g><circle cx="12" cy="12" r="8" /><path d="M12 4a8 8 0 010 16z" class="fill" /></g>
        )}
      </svg>
    </button>
  );
}

export function ConnBanner() {
  const s = useAppState();
  if (!hasAccess()) return <div class="sr-only" role="status" aria-live="polite" />;
  const e2e = !!paired(s.machineId);
  const msg = !s.online
    ? 'Offline, reconnecting…'
    : e2e && s.chan === 'failed'
      ? `No end-to-end channel to ${s.machine?.name || s.machineId}: ${s.chanError}`
      : s.conn === 'retrying' || (e2e && s.chan === 'reconnecting')
        ? e2e
          ? `Reconnecting to ${s.machine?.name || s.machineId} end to end…${s.chanError ? ` (${s.chanError})` : ''}`
          : 'Connection lost, reconnecting…'
        : '';
  return (
    <div class={msg ? 'banner' : 'sr-only'} role="status" aria-live="polite" data-testid="conn-banner">
      {msg}
      {e2e && s.chan === 'failed' && <> · <a href="#/pair">Pair again</a></>}
    </div>
  );
}

/** The current paired machine's channel, in words: "end-to-end encrypted" only while it is. */
export function ChanState() {
  const s = useAppState();
  const p = paired(s.machineId);
  if (!p) return null;
  const words: Record<string, string> = {
    none: 'not connected', opening: 'connecting end to end…', open: 'end-to-end encrypted',
    reconnecting: 'reconnecting…', failed: 'no channel' + (s.chanError ? ': ' + s.chanError : ''),
  };
  return <span data-testid="chan-state" data-state={s.chan}>{words[s.chan]}</span>;
}

/** Under a paired machine's title: the channel's state and the machine key's fingerprint. */
export function E2EBadge() {
  const s = useAppState();
  const p = paired(s.machineId);
  if (!p) return null;
  return (
    <p class={'e2e small' + (s.chan === 'open' ? ' on' : '')} data-testid="e2e-badge">
      <span aria-hidden="true">{s.chan === 'open' ? '🔒 ' : '… '}</span>
      <ChanState /> · key <code title={p.fingerprint}>{p.fingerprint.slice(0, 19)}…</code> · <a href={href.machines()}>details</a>
    </p>
  );
}

export function Toast() {
  const s = useAppState();
  return (
    <div class={s.toast ? 'toast' : 'sr-only'} role="alert" aria-live="assertive">
      {s.toast}
    </div>
  );
}

/**
 * A block of code or output that scrolls when long or wide: focusable (Tab reaches it, arrows
 * scroll it) and named, a group rather than a region so that many of them add no landmarks.
 */
export function ScrollPre(p: { class: string; label: string; children: ComponentChildren; testid?: string }) {
  return (
    <pre class={p.class} tabIndex={0} role="group" aria-label={p.label} data-testid={p.testid}>
      {p.children}
    </pre>
  );
}

export function StatusChip({ s }: { s: Pick<Session, 'status' | 'agentStatus'> }) {
  const label = s.status === 'running' && s.agentStatus && s.agentStatus !== 'idle' ? s.agentStatus.replace(/_/g, ' ') : s.status;
  return <span class={`chip st-${s.status}`}>{label}</span>;
}

export function Spinner({ label = 'Loading' }: { label?: string }) {
  return <span class="spinner" role="progressbar" aria-label={label} />;
}

export function ago(t?: string): string {
  if (!t) return '';
  const d = (Date.now() - Date.parse(t)) / 1000;
  if (!isFinite(d)) return '';
  if (d < 60) return 'just now';
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

export const money = (x?: number) => `$${(x || 0).toFixed(x && x < 0.01 ? 4 : 2)}`;

export function ErrorBox({ error }: { error?: string }) {
  return error ? <p class="error" role="alert">{error}</p> : null;
}

/** Reads image files as FileAttachments (base64), at most 10 and 20 MiB in all. */
export async function readImages(files: FileList | File[], have: { base64Data: string }[]) {
  const out: { name: string; mimeType: string; base64Data: string }[] = [];
  let total = have.reduce((n, f) => n + f.base64Data.length * 0.75, 0);
  for (const f of Array.from(files)) {
    if (have.length + out.length >= 10) throw new Error('At most 10 files');
    const blob = await shrink(f);
    total += blob.size;
    if (total > 20 * 1024 * 1024) throw new Error('At most 20 MiB of files in all');
    const data = await new Promise<string>((res, rej) => {
      const r = new FileReader();
      r.onload = () => res(String(r.result));
      r.onerror = () => rej(r.error);
      r.readAsDataURL(blob);
    });
    const renamed = blob !== f ? (f.name || 'photo').replace(/\.[^.]*$/, '') + '.jpg' : f.name || 'photo.jpg';
    out.push({ name: renamed, mimeType: blob.type || 'image/jpeg', base64Data: data.slice(data.indexOf(',') + 1) });
  }
  return out;
}

/** A phone photo over 1.5 MB becomes a JPEG of at most 2048 px on its long side. */
async function shrink(f: File): Promise<Blob> {
  if (f.size < 1.5 * 1024 * 1024 || !/^image\/(jpeg|png|webp|heic|heif)$/.test(f.type) || typeof createImageBitmap !== 'function') return f;
  try {
    const bmp = await createImageBitmap(f);
    const k = Math.min(1, 2048 / Math.max(bmp.width, bmp.height));
    const c = document.createElement('canvas');
    c.width = Math.round(bmp.width * k);
    c.height = Math.round(bmp.height * k);
    c.getContext('2d')!.drawImage(bmp, 0, 0, c.width, c.height);
    bmp.close();
    const b = await new Promise<Blob | null>((res) => c.toBlob(res, 'image/jpeg', 0.85));
    return b && b.size < f.size ? b : f;
  } catch {
    return f;
  }
}

export function Attachments(p: { files: { name: string; mimeType: string; base64Data: string }[]; onRemove: (i: number) => void }) {
  if (!p.files.length) return null;
  return (
    <ul class="attachments" aria-label="Attached images">
      {p.files.map((f, i) => (
        <li key={i}>
          <img src={`data:${f.mimeType};base64,${f.base64Data}`} alt={f.name} />
          <button type="button" class="x" aria-label={`Remove ${f.name}`} onClick={() => p.onRemove(i)}>×</button>
        </li>
      ))}
    </ul>
  );
}
