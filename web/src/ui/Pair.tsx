// "Pair a machine": the code that `betcode-agent pair` prints (a QR code to scan with the camera,
// or its betcode-pair:1:… text to paste), then the end-to-end pairing of src/e2ee; the pairing is
// stored on this device and the machine becomes the current one.
import { useEffect, useRef, useState } from 'preact/hooks';
import { loadOrCreateDeviceKey, pair, parsePairingCode, savePairing, shareCodeUser, type PairingCode } from '../e2ee';
import { deviceName, reloadPairings, setDeviceName, useAppState, useMachine } from '../store';
import { go, href } from '../router';
import { TopBar } from './common';

type Detect = (v: HTMLVideoElement) => Promise<string | undefined>;

/** A QR reader of video frames: the browser's BarcodeDetector where it reads QR codes, else jsQR (loaded now). */
async function qrReader(): Promise<Detect> {
  const BD = (globalThis as unknown as { BarcodeDetector?: { new (o: { formats: string[] }): { detect(s: CanvasImageSource): Promise<{ rawValue: string }[]> }; getSupportedFormats(): Promise<string[]> } }).BarcodeDetector;
  if (BD) {
    try {
      if ((await BD.getSupportedFormats()).includes('qr_code')) {
        const d = new BD({ formats: ['qr_code'] });
        return async (v) => (await d.detect(v))[0]?.rawValue;
      }
    } catch {
      /* fall back to jsQR */
    }
  }
  const { default: jsQR } = await import('jsqr');
  const c = document.createElement('canvas');
  const g = c.getContext('2d', { willReadFrequently: true })!;
  return async (v) => {
    const k = Math.min(1, 800 / Math.max(v.videoWidth, v.videoHeight));
    const w = Math.round(v.videoWidth * k);
    const h = Math.round(v.videoHeight * k);
    if (!w || !h) return undefined;
    c.width = w;
    c.height = h;
    g.drawImage(v, 0, 0, w, h);
    return jsQR(g.getImageData(0, 0, w, h).data, w, h, { inversionAttempts: 'attemptBoth' })?.data || undefined;
  };
}

/** Why pairing failed, for people: the library's and the machine's words, with what to do. */
function pairError(e: unknown): string {
  const c = e as { code?: string; wsCode?: number; message?: string };
  const msg = c?.message || String(e);
  if (c?.code === 'KEY_MISMATCH') return msg + '. Do not use this relay to pair; tell whoever runs it.';
  if (c?.wsCode === 4401 || c?.wsCode === 4403 || c?.code === 'PAIRING_FAILED') {
    let m = msg.replace(/^[A-Z_]+: /, '');
    if (!/expired|used|spent/i.test(m)) m += ' (the code may have expired or been used)';
    if (!m.includes('betcode-agent pair')) m = m.replace(/\.?$/, '. Run betcode-agent pair on the machine for a new code.');
    return m;
  }
  if (c?.wsCode === 4404 || c?.wsCode === 4503) return msg + '. Is the machine running and connected to this relay?';
  return msg;
}

export function Pair() {
  const s = useAppState();
  const [name, setName] = useState(deviceName);
  const [text, setText] = useState('');
  const [phase, setPhase] = useState<'' | 'starting' | 'scanning' | 'pairing'>('');
  const [status, setStatus] = useState('');
  const [error, setError] = useState('');
  const video = useRef<HTMLVideoElement>(null);
  const stop = useRef<(() => void) | null>(null);
  const busy = useRef(false);
  useEffect(() => () => stop.current?.(), []);

  const doPair = async (raw: string) => {
    if (busy.current) return;
    setError('');
    let code: PairingCode;
    try {
      code = parsePairingCode(raw.trim());
    } catch (e) {
      setError((e as Error).message);
      setStatus('');
      setPhase('');
      return;
    }
    // A session share's code (betcode session share) pairs with this browser's own relay login.
    const shareUser = shareCodeUser(code);
    if (shareUser !== undefined && !s.token) {
      setError(`This code shares a session with ${shareUser}: log in to the relay as ${shareUser} first, then pair with it.`);
      return;
    }
    busy.current = true;
    setPhase('pairing');
    setStatus(shareUser !== undefined ? `Joining a session shared with ${shareUser} on machine ${code.machineId}, end to end…` : `Pairing with machine ${code.machineId}, end to end…`);
    try {
      const deviceKey = await loadOrCreateDeviceKey();
      const n = name.trim() || deviceName();
      const p = await pair({ code, deviceKey, name: n, loginToken: s.token || undefined });
      await savePairing(p);
      if (name.trim()) setDeviceName(n);
      await reloadPairings();
      setStatus(`Paired with ${p.machineName || p.machineId}`);
      setText('');
      await useMachine(p.machineId, false);
      go(p.share ? href.conv(p.machineId, p.share.sessionId) : href.sessions(p.machineId));
    } catch (e) {
      setError(pairError(e));
      setStatus('');
    } finally {
      busy.current = false;
      setPhase('');
    }
  };

  const scan = async () => {
    setError('');
    setStatus('');
    if (!navigator.mediaDevices?.getUserMedia) {
      setError('This browser gives no camera to this page: paste the code instead.');
      return;
    }
    setPhase('starting');
    let stream: MediaStream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: 'environment' }, audio: false });
    } catch (e) {
      setPhase('');
      setError((e as Error).name === 'NotAllowedError' ? 'The camera was not allowed: allow it for this site, or paste the code instead.' : 'No camera could be opened: paste the code instead.');
      return;
    }
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const v = video.current!;
    stop.current = () => {
      stopped = true;
      clearTimeout(timer);
      stream.getTracks().forEach((t) => t.stop());
      v.srcObject = null;
      stop.current = null;
    };
    setPhase('scanning');
    setStatus('Point the camera at the QR code that betcode-agent pair shows…');
    v.srcObject = stream;
    await v.play().catch(() => {});
    let read: Detect;
    try {
      read = await qrReader();
    } catch {
      stop.current?.();
      setPhase('');
      setError('The QR reader could not load: paste the code instead.');
      return;
    }
    const tick = async () => {
      if (stopped) return;
      const t = await read(v).catch(() => undefined);
      if (stopped) return;
      if (t && t.startsWith('betcode-pair:')) {
        stop.current?.();
        setText(t);
        void doPair(t);
        return;
      }
      if (t) setStatus('That QR code is not a BetCode pairing code: scan the one betcode-agent pair shows.');
      timer = setTimeout(tick, 150);
    };
    void tick();
  };

  const cancelScan = () => {
    stop.current?.();
    setPhase('');
    setStatus('');
  };

  const submit = (e: Event) => {
    e.preventDefault();
    if (!text.trim()) {
      setError('Paste the pairing code (betcode-pair:1:…)');
      return;
    }
    void doPair(text);
  };

  const scanning = phase === 'scanning' || phase === 'starting';
  return (
    <>
      <TopBar title="Pair a machine" back={s.pairings.length || s.token ? href.machines() : undefined} backLabel="Machines" />
      <main class="page narrow stack-lg" id="main">
        <section class="card stack" aria-labelledby="pair-h">
          <h2 id="pair-h">Pair this device with a machine</h2>
          <p class="muted">
            On the machine, run <code>betcode-agent pair</code>. Scan the QR code it shows, or paste its text. Everything between
            this device and the machine is then encrypted end to end: the relay carries it but cannot read it.
          </p>
          <label for="device-name">This device’s name (the machine lists it)</label>
          <input id="device-name" data-testid="pair-device-name" value={name} maxLength={64} disabled={phase === 'pairing'}
            onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <div class="toolbar">
            {scanning ? (
              <button type="button" class="btn" data-testid="pair-scan-cancel" onClick={cancelScan}>Stop the camera</button>
            ) : (
              <button type="button" class="btn primary" data-testid="pair-scan" disabled={phase === 'pairing'} onClick={() => void scan()}>
                Scan the QR code
              </button>
            )}
          </div>
          <video ref={video} class="pair-video" hidden={!scanning} muted playsInline aria-label="Camera view" data-testid="pair-video" />
          <form class="stack" onSubmit={submit}>
            <label for="pair-code">Or paste the code</label>
            <textarea id="pair-code" data-testid="pair-code" rows={3} spellcheck={false} autocapitalize="off" value={text}
              placeholder="betcode-pair:1:…" disabled={phase === 'pairing'} aria-invalid={!!error} aria-describedby={error ? 'pair-error' : undefined}
              onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
            <button type="submit" class="btn" data-testid="pair-submit" disabled={phase === 'pairing'}>
              {phase === 'pairing' ? 'Pairing…' : 'Pair'}
            </button>
          </form>
          <p class="muted small" role="status" aria-live="polite" data-testid="pair-status">{status}</p>
          {error && <p id="pair-error" class="error" role="alert" data-testid="pair-error">{error}</p>}
        </section>
        {!s.token && (
          <p class="muted small">
            A machine that runs <code>--relay-e2e=optional</code> can also be reached by <a href={href.login()}>logging in to the relay</a>.
          </p>
        )}
      </main>
    </>
  );
}
