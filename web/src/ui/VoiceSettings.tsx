// The Settings section of voice dictation: whether the browser's own speech recognition may be
// used. Off by default: the recording then goes end to end to the user's machine, which
// transcribes it with its own endpoint (docs/web-api.md, "Voice dictation").
import { useState } from 'preact/hooks';

const KEY = 'betcode.voice.browserRecognition';

/** Whether the user turned on the browser's speech recognition (it may send audio to the vendor). */
export function browserRecognitionOn(): boolean {
  try {
    return localStorage.getItem(KEY) === '1';
  } catch {
    return false;
  }
}

function setBrowserRecognition(on: boolean) {
  try {
    if (on) localStorage.setItem(KEY, '1');
    else localStorage.removeItem(KEY);
  } catch {
    /* private mode: stays off */
  }
}

export function VoiceSettings() {
  const [on, setOn] = useState(browserRecognitionOn);
  return (
    <section class="card stack" aria-labelledby="voice-h">
      <h2 id="voice-h">Voice</h2>
      <p class="small">
        Hold the microphone button to dictate. The recording goes end to end to your machine, which transcribes it with the
        endpoint it is configured with (<code>voice-transcribe-url</code>); the relay never hears it.
      </p>
      <label class="option">
        <input
          type="checkbox"
          data-testid="voice-browser-toggle"
          checked={on}
          aria-describedby="voice-warn"
          onChange={(e) => {
            const v = (e.target as HTMLInputElement).checked;
            setBrowserRecognition(v);
            setOn(v);
          }}
        />{' '}
        Use the browser's speech recognition
      </label>
      <p class="small" id="voice-warn">
        Warning: some browsers (Chrome among them) send the audio to their vendor's servers to recognise it, outside BetCode's
        end-to-end encryption. Leave this off unless you accept that. Recognition that runs on this device is used either way.
      </p>
    </section>
  );
}
