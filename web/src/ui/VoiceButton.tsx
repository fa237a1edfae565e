// The hold-to-dictate button (docs/web-api.md, "Voice dictation"). This part is in the first load
// and tiny; the recorder (MediaRecorder, the channel call, the browser's speech recognition) is
// its own chunk, ./VoiceRecorder, fetched when a button is first hovered, focused or pressed.
//
// Hold the button (mouse, touch, pen) to record and release to send; a short tap, or Space/Enter
// on the focused button, starts and a second one stops. The text comes back into the box.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Dictation, Phase } from './VoiceRecorder';

let chunk: Promise<typeof import('./VoiceRecorder')> | undefined;
/** Fetches the recorder's chunk once. */
export const loadVoice = () => (chunk ??= import('./VoiceRecorder'));

/** A press shorter than this is a tap: it starts recording, and a second tap stops. */
const TAP_MS = 350;

export interface VoiceUI {
  button: ComponentChildren;
  status: ComponentChildren;
}

/**
 * The dictation button for a text box and its status line (recording, transcribing, or the
 * error), for the caller to place; onText gets the transcribed text.
 */
export function useVoice(onText: (text: string) => void, what: string): VoiceUI {
  const [phase, setPhase] = useState<Phase | 'starting'>('idle');
  const [error, setError] = useState('');
  const rec = useRef<Dictation | undefined>(undefined);
  const pressedAt = useRef(0);
  /** A hold released while the microphone was still starting: stop as soon as it runs. */
  const stopWhenStarted = useRef(false);
  const textCb = useRef(onText);
  textCb.current = onText;
  useEffect(() => () => rec.current?.cancel(), []);

  const start = async () => {
    if (rec.current || phase === 'starting' || phase === 'transcribing') return;
    setError('');
    setPhase('starting');
    stopWhenStarted.current = false;
    try {
      const m = await loadVoice();
      rec.current = await m.startDictation({
        onPhase: (p) => {
          setPhase(p);
          if (p === 'idle') rec.current = undefined;
        },
        onText: (t) => textCb.current(t),
        onError: (msg) => {
          rec.current = undefined;
          setPhase('idle');
          setError(msg);
        },
      });
      if (stopWhenStarted.current) rec.current.stop();
    } catch (e) {
      rec.current = undefined;
      setPhase('idle');
      setError((e as Error).message || String(e));
    }
  };
  const stop = () => {
    if (rec.current) rec.current.stop();
    else stopWhenStarted.current = true;
  };
  const recording = phase === 'recording' || phase === 'starting';

  const onPointerDown = (e: PointerEvent) => {
    if (e.button !== 0) return;
    e.preventDefault();
    (e.currentTarget as HTMLElement).setPointerCapture?.(e.pointerId);
    if (rec.current && phase === 'recording') {
      pressedAt.current = 0; // a second tap: stop
      stop();
      return;
    }
    pressedAt.current = Date.now();
    void start();
  };
  const onPointerUp = () => {
    if (!pressedAt.current) return;
    const held = Date.now() - pressedAt.current;
    pressedAt.current = 0;
    if (held >= TAP_MS) stop(); // a hold: release sends
  };
  // Keyboard and assistive technology activate with a click of detail 0: it toggles.
  const onClick = (e: MouseEvent) => {
    if (e.detail !== 0) return;
    if (rec.current) stop();
    else void start();
  };

  const label =
    phase === 'transcribing' ? `Transcribing your dictation` : recording ? `Stop dictating and insert the text` : `Dictate ${what} (hold, or press to start and stop)`;
  const button = (
    <button
      type="button"
      class={'icon-btn voice-btn' + (recording ? ' recording' : '')}
      data-testid="voice-button"
      data-state={phase}
      aria-label={label}
      aria-pressed={recording}
      title={label}
      disabled={phase === 'transcribing'}
      onPointerEnter={() => void loadVoice()}
      onFocus={() => void loadVoice()}
      onPointerDown={onPointerDown}
      onPointerUp={onPointerUp}
      onPointerCancel={onPointerUp}
      onClick={onClick}
      onContextMenu={(e) => e.preventDefault()}
    >
      <svg viewBox="0 0 24 24" aria-hidden="true">
        <rect x="9" y="3" width="6" height="11" rx="3" class={recording ? 'fill' : ''} />
        <path d="M5 11a7 7 0 0014 0M12 18v3" />
      </svg>
    </button>
  );
  const text = phase === 'starting' ? 'Starting the microphone…' : phase === 'recording' ? 'Recording… release (or press again) to insert the text' : phase === 'transcribing' ? 'Transcribing on your machine…' : '';
  const status = (
    <>
      <p class="voice-status small" role="status" data-testid="voice-status">{text}</p>
      {error && <p class="error small" role="alert" data-testid="voice-error">{error}</p>}
    </>
  );
  return { button, status };
}

/** Appends dictated text to what a box holds, with a space between. */
export function appendText(have: string, add: string): string {
  if (!add) return have;
  if (!have) return add;
  return /\s$/.test(have) ? have + add : have + ' ' + add;
}
