package webapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeVoice is VoiceService answering "you said N bytes" (or err), and
// recording what it got.
type fakeVoice struct {
	pb.UnimplementedVoiceServiceServer
	mu  sync.Mutex
	got []*pb.TranscribeRequest
	err error
}

func (f *fakeVoice) Transcribe(ctx context.Context, req *pb.TranscribeRequest) (*pb.TranscribeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	if f.err != nil {
		return nil, f.err
	}
	return &pb.TranscribeResponse{Text: "dictated text", Model: "whisper-1"}, nil
}

func (f *fakeVoice) requests() []*pb.TranscribeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.TranscribeRequest(nil), f.got...)
}

// newVoiceServer is a Handler of role on fakeVoice.
func newVoiceServer(t *testing.T, role string) (*testServer, *fakeVoice) {
	t.Helper()
	fv := &fakeVoice{}
	gs := grpc.NewServer()
	pb.RegisterVoiceServiceServer(gs, fv)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///fake",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Conn: conn, Role: role, Version: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		conn.Close()
		gs.Stop()
		<-served
	})
	return &testServer{h: h, srv: srv}, fv
}

func TestVoiceTranscription(t *testing.T) {
	ts, fv := newVoiceServer(t, RoleAgent)
	audio := []byte("\x1aE\xdf\xa3 opus frames")
	b64 := base64.StdEncoding.EncodeToString(audio)

	for _, tc := range []struct {
		name     string
		body     any
		hdr      []string
		path     string
		wantType string
		wantLang string
	}{
		{name: "json", body: map[string]string{"mimeType": "audio/webm;codecs=opus", "base64Data": b64, "language": "en"},
			wantType: "audio/webm;codecs=opus", wantLang: "en"},
		{name: "json with a data URL", body: map[string]string{"base64Data": "data:audio/ogg;base64," + b64}, wantType: "audio/ogg"},
		{name: "raw audio", body: string(audio), hdr: []string{"Content-Type", "audio/wav"}, path: "?language=de", wantType: "audio/wav", wantLang: "de"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fv.requests())
			status, _, out := ts.call(t, http.MethodPost, "/api/voice/transcriptions"+tc.path, "tok", tc.body, tc.hdr...)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, out)
			}
			if got := decode[Transcription](t, out); got.Text != "dictated text" || got.Model != "whisper-1" {
				t.Errorf("answer %+v", got)
			}
			reqs := fv.requests()
			if len(reqs) != before+1 {
				t.Fatalf("VoiceService got %d calls, want 1", len(reqs)-before)
			}
			r := reqs[len(reqs)-1]
			if !bytes.Equal(r.GetAudio(), audio) || r.GetMimeType() != tc.wantType || r.GetLanguage() != tc.wantLang {
				t.Errorf("VoiceService got %q %q %q, want the recording, %q, %q", r.GetAudio(), r.GetMimeType(), r.GetLanguage(), tc.wantType, tc.wantLang)
			}
		})
	}
}

func TestVoiceTranscriptionErrors(t *testing.T) {
	ts, fv := newVoiceServer(t, RoleAgent)
	big := strings.Repeat("A", maxAudioBody*4/3+8192)
	for _, tc := range []struct {
		name   string
		token  string
		body   any
		hdr    []string
		grpc   error
		status int
		code   string
	}{
		{name: "no token", body: map[string]string{"base64Data": "AAAA"}, status: 401, code: "UNAUTHENTICATED"},
		{name: "not base64", token: "t", body: map[string]string{"mimeType": "audio/webm", "base64Data": "%%%"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "malformed json", token: "t", body: "{", status: 400, code: "INVALID_ARGUMENT"},
		{name: "too large json", token: "t", body: `{"mimeType":"audio/webm","base64Data":"` + big + `"}`, status: 413, code: "AUDIO_TOO_LARGE"},
		{name: "too large raw", token: "t", body: strings.Repeat("x", maxAudioBody+1), hdr: []string{"Content-Type", "audio/webm"}, status: 413, code: "AUDIO_TOO_LARGE"},
		{name: "not configured", token: "t", body: map[string]string{"mimeType": "audio/webm", "base64Data": "AAAA"},
			grpc: betcodeErr(codes.FailedPrecondition, "VOICE_NOT_CONFIGURED", "set voice-transcribe-url", nil), status: 409, code: "VOICE_NOT_CONFIGURED"},
		{name: "endpoint failed", token: "t", body: map[string]string{"mimeType": "audio/webm", "base64Data": "AAAA"},
			grpc: betcodeErr(codes.Unavailable, "TRANSCRIPTION_FAILED", "answered 500", nil), status: 503, code: "TRANSCRIPTION_FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fv.mu.Lock()
			fv.err = tc.grpc
			fv.mu.Unlock()
			status, _, out := ts.call(t, http.MethodPost, "/api/voice/transcriptions", tc.token, tc.body, tc.hdr...)
			if got := decode[errorBody](t, out); status != tc.status || got.Code != tc.code {
				t.Errorf("%d %s (%s), want %d %s", status, got.Code, got.Error, tc.status, tc.code)
			}
		})
	}
}

// TestVoiceNeverThroughTheRelay: the relay's handler refuses dictation
// before reading it, with or without a token, and calls nothing.
func TestVoiceNeverThroughTheRelay(t *testing.T) {
	ts, fv := newVoiceServer(t, RoleRelay)
	for _, tok := range []string{"", "owner-token"} {
		status, _, out := ts.call(t, http.MethodPost, "/api/voice/transcriptions", tok,
			map[string]string{"mimeType": "audio/webm", "base64Data": "AAAA"}, "X-Betcode-Machine", "m1")
		if got := decode[errorBody](t, out); status != http.StatusForbidden || got.Code != "E2E_REQUIRED" || !strings.Contains(got.Error, "end-to-end") {
			t.Errorf("token %q: %d %+v, want 403 E2E_REQUIRED saying why", tok, status, got)
		}
	}
	if n := len(fv.requests()); n != 0 {
		t.Errorf("the relay's handler made %d VoiceService calls", n)
	}
}
