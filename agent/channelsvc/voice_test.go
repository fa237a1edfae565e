package channelsvc_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/voice"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// TestWebChannelVoice: a recording of the largest size the machine takes
// crosses a web/1 channel (its base64 in one frame) and the agent's gRPC
// server to the transcription endpoint, byte for byte; one byte more is
// refused with AUDIO_TOO_LARGE and never sent on.
func TestWebChannelVoice(t *testing.T) {
	stt, err := fakeopenai.StartTranscriptions("", "from the channel", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stt.Close() })
	c, err := voice.New(voice.Config{URL: stt.Endpoint()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := newWebMachine(t, func(s *grpc.Server) { pb.RegisterVoiceServiceServer(s, voice.NewService(c)) })
	ctx := ctxT(t)
	w, err := m.dialWeb(ctx, t, pairDevice(ctx, t, m, "phone"), pairing.ProtocolWeb)
	if err != nil {
		t.Fatal(err)
	}
	audio := bytes.Repeat([]byte{0x1a, 0x45, 0xdf, 0xa3, 0x42}, voice.MaxAudioBytes/5)
	body := func(a []byte) string {
		b, _ := json.Marshal(map[string]string{"mimeType": "audio/webm;codecs=opus", "base64Data": base64.StdEncoding.EncodeToString(a)})
		return string(b)
	}
	if st, res := w.request(1, "POST", "/voice/transcriptions", body(audio)); st != 200 || !strings.Contains(res, `"text":"from the channel"`) {
		t.Fatalf("POST /voice/transcriptions of %d bytes: %d %s", len(audio), st, res)
	}
	if got := stt.Requests(); len(got) != 1 || !bytes.Equal(got[0].Audio, audio) {
		t.Fatalf("the endpoint got %d requests, want 1 with the recording", len(got))
	}
	if st, res := w.request(2, "POST", "/voice/transcriptions", body(append(audio, 0))); st != 400 || !strings.Contains(res, voice.CodeAudioTooLarge) {
		t.Fatalf("POST /voice/transcriptions of %d bytes: %d %s, want 400 %s", len(audio)+1, st, res, voice.CodeAudioTooLarge)
	}
	if n := len(stt.Requests()); n != 1 {
		t.Errorf("the endpoint got %d requests, want still 1", n)
	}
}
