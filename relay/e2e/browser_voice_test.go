package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/browsertest"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// voiceResult is what web/e2e/voice.mjs reports.
type voiceResult struct {
	Steps              []string `json:"steps"`
	ButtonLabel        string   `json:"buttonLabel"`
	RecordingStatus    string   `json:"recordingStatus"`
	RecordingPressed   string   `json:"recordingPressed"`
	HoldMs             int      `json:"holdMs"`
	AfterHold          string   `json:"afterHold"`
	AfterKeyboard      string   `json:"afterKeyboard"`
	Message            string   `json:"message"`
	ErrorText          string   `json:"errorText"`
	MessageAfterError  string   `json:"messageAfterError"`
	BrowserRecognition bool     `json:"browserRecognition"`
	SettingsWarning    string   `json:"settingsWarning"`
	FramesSent         int      `json:"framesSent"`
	pageTraffic
}

// TestBrowserVoiceThroughRelay is issue 24's dictation in a real browser: a
// phone paired with a machine (--relay-e2e=required, its transcription
// endpoint the fake) holds the dictation button while chromium's fake
// microphone plays a WAV; the recording crosses the relay only inside the
// end-to-end channel, the machine transcribes it with the fake, and the
// text fills the prompt box (then by keyboard, and in the conversation's
// message box). The relay's traffic holds neither the audio nor the text,
// and the relay refuses dictation in clear, by REST and by gRPC.
func TestBrowserVoiceThroughRelay(t *testing.T) {
	browsertest.Require(t)
	stt, err := fakeopenai.StartTranscriptions("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stt.Close() })
	texts := []string{"please list the files", "and count them", "thanks for that"}
	for _, s := range texts {
		stt.Enqueue(fakeopenai.TranscriptionReply{Text: s})
	}
	stt.Enqueue(fakeopenai.TranscriptionReply{Status: http.StatusServiceUnavailable, Message: "the model is overloaded"})

	w := newWorld(t, "")
	a := w.startE2EAgent("voice-m", "--voice-transcribe-url", stt.Endpoint())
	ctx := ctxT(t, 4*time.Minute)

	code, pairCmd, _ := pairCode(ctx, t, a)
	dir := t.TempDir()
	wav := filepath.Join(dir, "speech.wav")
	if err := os.WriteFile(wav, toneWAV(3*time.Second), 0o600); err != nil {
		t.Fatal(err)
	}
	framesFile := filepath.Join(dir, "frames.json")
	out := browsertest.Run(t, browsertest.Options{
		Script: "voice.mjs", BaseURL: w.webURL(), ChromiumArgs: w.trustRelay(), Timeout: 3 * time.Minute,
		// BETCODE_SCREENSHOTS_DIR (make screenshots): the dictation button and the voice settings for docs/screenshots.
		Params: map[string]any{"outDir": os.Getenv("BETCODE_SCREENSHOTS_DIR"), "code": code, "deviceName": "Voice phone (chromium)", "cwd": a.project, "wav": wav, "framesFile": framesFile},
	})
	_ = pairCmd.Wait()
	var r voiceResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("voice.mjs: held %d ms to %q; keyboard %q; message box %q; %d frames sent; /api requests %q; WebSockets %q",
		r.HoldMs, r.AfterHold, r.AfterKeyboard, r.Message, r.FramesSent, r.APIRequests, r.WebSockets)

	if want := []string{"paired", "hold", "keyboard", "composer", "settings"}; !slices.Equal(r.Steps, want) {
		t.Errorf("steps %q, want %q", r.Steps, want)
	}
	if r.AfterHold != texts[0] || r.AfterKeyboard != texts[0]+" "+texts[1] || r.Message != texts[2] {
		t.Errorf("the boxes hold %q, %q and %q; want %q, %q and %q", r.AfterHold, r.AfterKeyboard, r.Message,
			texts[0], texts[0]+" "+texts[1], texts[2])
	}
	if !strings.Contains(r.ButtonLabel, "Dictate") || r.RecordingPressed != "true" || !strings.Contains(r.RecordingStatus, "Recording") {
		t.Errorf("button %q, pressed while recording %q, status %q", r.ButtonLabel, r.RecordingPressed, r.RecordingStatus)
	}
	if r.BrowserRecognition || !strings.Contains(r.SettingsWarning, "vendor") {
		t.Errorf("Settings: browser recognition on %v, warning %q; want off by default, with the vendor warning", r.BrowserRecognition, r.SettingsWarning)
	}
	if !strings.Contains(r.ErrorText, "Not transcribed") || !strings.Contains(r.ErrorText, "503: the model is overloaded") || r.MessageAfterError != texts[2] {
		t.Errorf("the endpoint's 503 shows %q and leaves the box %q; want why, and the box as it was (%q)", r.ErrorText, r.MessageAfterError, texts[2])
	}
	for _, al := range r.Alerts {
		if al.Text == r.ErrorText {
			continue // the 503's, expected
		}
		t.Errorf("the app showed an error: %q (at %s)", al.Text, al.URL)
	}

	// The fake endpoint got the four recordings from the machine, as WebM/Opus.
	got := stt.Requests()
	if len(got) != len(texts)+1 {
		t.Fatalf("the transcription endpoint got %d requests, want %d", len(got), len(texts)+1)
	}
	var audioBytes int
	for i, g := range got {
		audioBytes += len(g.Audio)
		if !strings.HasPrefix(g.FileType, "audio/webm") || !bytes.HasPrefix(g.Audio, []byte{0x1a, 0x45, 0xdf, 0xa3}) || len(g.Audio) < 1000 || g.Model != "whisper-1" {
			t.Errorf("recording %d: %s, %d bytes (starts %x), model %q; want WebM audio from the fake microphone, whisper-1", i, g.FileType, len(g.Audio), g.Audio[:min(4, len(g.Audio))], g.Model)
		}
	}

	// What the relay carried: no call of the machine outside the channel, and in the
	// channel's frames neither the audio (raw or base64) nor the transcripts.
	for _, req := range r.APIRequests {
		if p := strings.Fields(req)[1]; p != "/api/info" && p != "/api/sealed" && p != "/api/push" {
			t.Errorf("a request reached the relay outside the channel: %s", req)
		}
	}
	for _, ws := range r.WebSockets {
		if ws != "/api/channel" && ws != "/api/pair" {
			t.Errorf("a WebSocket to %s: only /api/channel and /api/pair may carry the machine's calls", ws)
		}
	}
	raw, err := os.ReadFile(framesFile)
	if err != nil {
		t.Fatal(err)
	}
	var frames struct{ Sent, Received []string }
	if err := json.Unmarshal(raw, &frames); err != nil {
		t.Fatal(err)
	}
	sent, received := decodeFrames(t, frames.Sent), decodeFrames(t, frames.Received)
	if len(sent) < audioBytes {
		t.Errorf("the page sent %d bytes on its WebSockets, less than the %d bytes of audio: the recording did not go that way", len(sent), audioBytes)
	}
	for i, g := range got {
		mid := len(g.Audio) / 2
		b64 := base64.StdEncoding.EncodeToString(g.Audio)
		if bytes.Contains(sent, g.Audio[mid:mid+32]) || bytes.Contains(sent, []byte(b64[len(b64)/2:len(b64)/2+48])) {
			t.Errorf("recording %d is in clear in the WebSocket frames the relay carried", i)
		}
	}
	relayLog := w.relay.Log()
	for _, s := range texts {
		if bytes.Contains(received, []byte(s)) || bytes.Contains(sent, []byte(s)) || strings.Contains(relayLog, s) {
			t.Errorf("the transcript %q is in clear in the relay's traffic or log", s)
		}
	}

	// The hostile side: the relay (or a login of the owner's, which the relay can mint) asking
	// the machine to transcribe in clear is refused, by REST and by gRPC, and reaches nothing.
	b := w.browser(w.userToken("alice"))
	var e struct{ Error, Code string }
	if st := b.do(http.MethodPost, "/api/voice/transcriptions", map[string]string{"mimeType": "audio/webm", "base64Data": "GkXfow=="}, &e,
		"X-Betcode-Machine", "voice-m"); st != http.StatusForbidden || e.Code != "E2E_REQUIRED" {
		t.Errorf("POST /api/voice/transcriptions on the relay: %d %+v, want 403 E2E_REQUIRED", st, e)
	}
	_, err = pb.NewVoiceServiceClient(w.client()).Transcribe(onMachine(ctx, "voice-m"), &pb.TranscribeRequest{Audio: []byte("GkXf"), MimeType: "audio/webm"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("VoiceService.Transcribe through the relay in clear: %v, want PERMISSION_DENIED", err)
	}
	if n := len(stt.Requests()); n != len(got) {
		t.Errorf("the transcription endpoint got %d requests after the relay's attempts, want still %d", n, len(got))
	}
}

// decodeFrames joins the base64 payloads voice.mjs wrote.
func decodeFrames(t *testing.T, frames []string) []byte {
	t.Helper()
	var out []byte
	for _, f := range frames {
		b, err := base64.StdEncoding.DecodeString(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// toneWAV is d of a warbling tone as 16 kHz mono 16-bit PCM WAV: chromium's
// fake microphone plays it (in a loop) to the page.
func toneWAV(d time.Duration) []byte {
	const rate = 16000
	n := int(d.Seconds() * rate)
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // mono
	le(uint32(rate))
	le(uint32(2 * rate))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * n))
	for i := range n {
		ts := float64(i) / rate
		f := 220 + 80*math.Sin(2*math.Pi*3*ts)
		le(int16(12000 * math.Sin(2*math.Pi*f*ts)))
	}
	return b.Bytes()
}
