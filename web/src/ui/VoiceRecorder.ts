// The recorder behind the dictation button (its own chunk, loaded by VoiceButton). By default it
// records with MediaRecorder and sends the recording to the machine: inside its end-to-end channel
// for a paired machine, or to the agent that serves this page; never to a relay in clear. The
// browser's speech recognition is used instead only where it runs on the device, or when the
// user turned it on in Settings knowing that some browsers send the audio to their vendor.
import { ApiError, post } from '../api';
import { base64 } from '../e2ee';
import { paired, state } from '../store';
import { browserRecognitionOn } from './VoiceSettings';

export type Phase = 'idle' | 'recording' | 'transcribing';

export interface Callbacks {
  onPhase(p: Phase): void;
  onText(text: string): void;
  onError(message: string): void;
}

/** One dictation: stop() ends it and inserts its text; cancel() drops it. */
export interface Dictation {
  stop(): void;
  cancel(): void;
}

/** The longest recording: 2 minutes (the machine takes at most 3,000,000 bytes). */
export const MAX_MS = 120_000;

/** Starts a dictation with the path this page may use. */
export async function startDictation(cb: Callbacks): Promise<Dictation> {
  const SR = speechRecognition();
  if (SR && (browserRecognitionOn() || (await onDevice(SR)))) return recognize(SR, cb);
  if (!machineReachable()) {
    throw new Error('Dictation needs this browser paired with the machine: the recording goes only end to end, never to the relay in clear. Pair it (Machines), or turn on the browser\'s speech recognition in Settings.');
  }
  return record(cb);
}

/** Whether a recording would reach the machine without the relay reading it. */
function machineReachable(): boolean {
  return state.info?.role === 'agent' || !!paired(state.machineId);
}

// --- The default path: record, send to the machine, insert its text. ---

async function record(cb: Callbacks): Promise<Dictation> {
  if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === 'undefined') {
    throw new Error('This browser cannot record audio here (it needs https and MediaRecorder).');
  }
  let stream: MediaStream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true } });
  } catch (e) {
    const n = (e as DOMException).name;
    throw new Error(n === 'NotAllowedError' ? 'The microphone is blocked: allow it for this site in the browser\'s settings.' : n === 'NotFoundError' ? 'No microphone was found.' : 'The microphone could not start: ' + (e as Error).message);
  }
  const type = ['audio/webm;codecs=opus', 'audio/ogg;codecs=opus', 'audio/webm', 'audio/mp4'].find((t) => MediaRecorder.isTypeSupported?.(t));
  const mr = new MediaRecorder(stream, type ? { mimeType: type, audioBitsPerSecond: 32000 } : undefined);
  const chunks: Blob[] = [];
  let cancelled = false;
  const release = () => stream.getTracks().forEach((t) => t.stop());
  const limit = setTimeout(() => mr.state !== 'inactive' && mr.stop(), MAX_MS);
  mr.ondataavailable = (e) => e.data.size && chunks.push(e.data);
  mr.onstop = () => {
    clearTimeout(limit);
    release();
    if (cancelled) return;
    const blob = new Blob(chunks, { type: mr.mimeType || type || 'audio/webm' });
    void transcribe(blob, cb);
  };
  mr.onerror = () => {
    clearTimeout(limit);
    release();
    if (!cancelled) cb.onError('The recording failed.');
  };
  mr.start(1000);
  cb.onPhase('recording');
  return {
    stop: () => mr.state !== 'inactive' && mr.stop(),
    cancel: () => {
      cancelled = true;
      if (mr.state !== 'inactive') mr.stop();
      else release();
    },
  };
}

async function transcribe(blob: Blob, cb: Callbacks) {
  if (!blob.size) {
    cb.onError('Nothing was recorded: hold the button while you speak.');
    return;
  }
  cb.onPhase('transcribing');
  try {
    const base64Data = base64(new Uint8Array(await blob.arrayBuffer()));
    const r = await post<{ text: string }>('/voice/transcriptions', { mimeType: blob.type, base64Data, language: lang().split('-')[0] });
    cb.onPhase('idle');
    if (r.text) cb.onText(r.text);
    else cb.onError('Nothing was recognised in the recording.');
  } catch (e) {
    const code = e instanceof ApiError ? e.code : '';
    const msg = (e as Error).message || String(e);
    cb.onError(code === 'VOICE_NOT_CONFIGURED' ? 'Voice is not set up on this machine: ' + msg : code === 'UNIMPLEMENTED' || code === 'HTTP_404' ? 'This machine is too old for dictation: update betcode-agent.' : 'Not transcribed: ' + msg);
  }
}

const lang = () => document.documentElement.lang || navigator.language || 'en';

// --- The browser's own speech recognition (Web Speech API). ---

interface SRResult { isFinal: boolean; 0: { transcript: string } }
interface SREvent { resultIndex: number; results: ArrayLike<SRResult> }
interface SRInstance {
  lang: string; continuous: boolean; interimResults: boolean; processLocally?: boolean;
  onresult: ((e: SREvent) => void) | null; onerror: ((e: { error: string }) => void) | null; onend: (() => void) | null;
  start(): void; stop(): void; abort(): void;
}
interface SRClass {
  new (): SRInstance;
  available?: (o: { langs: string[]; processLocally: boolean }) => Promise<string>;
}

function speechRecognition(): SRClass | undefined {
  const w = window as unknown as { SpeechRecognition?: SRClass; webkitSpeechRecognition?: SRClass };
  return w.SpeechRecognition || w.webkitSpeechRecognition;
}

/** Whether the browser can recognise speech on this device (Chrome's processLocally), with no vendor in the loop. */
async function onDevice(SR: SRClass): Promise<boolean> {
  try {
    return typeof SR.available === 'function' && (await SR.available({ langs: [lang()], processLocally: true })) === 'available';
  } catch {
    return false;
  }
}

function recognize(SR: SRClass, cb: Callbacks): Dictation {
  const r = new SR();
  r.lang = lang();
  r.continuous = true;
  r.interimResults = false;
  if (!browserRecognitionOn()) r.processLocally = true; // the on-device path only
  let text = '';
  let cancelled = false;
  let failed = false;
  r.onresult = (e) => {
    for (let i = e.resultIndex; i < e.results.length; i++) if (e.results[i].isFinal) text += e.results[i][0].transcript;
  };
  r.onerror = (e) => {
    if (e.error === 'aborted' || e.error === 'no-speech') return;
    failed = true;
    cb.onError(e.error === 'not-allowed' ? 'The microphone is blocked: allow it for this site in the browser\'s settings.' : 'Speech recognition failed: ' + e.error);
  };
  r.onend = () => {
    if (cancelled || failed) return;
    cb.onPhase('idle');
    const t = text.trim();
    if (t) cb.onText(t);
    else cb.onError('Nothing was recognised: hold the button while you speak.');
  };
  r.start();
  cb.onPhase('recording');
  return {
    stop: () => {
      cb.onPhase('transcribing');
      r.stop();
    },
    cancel: () => {
      cancelled = true;
      r.abort();
    },
  };
}
