package voice_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/voice"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeopenai"
)

// secretKey must never appear in a log line.
const secretKey = "sk-voice-test-9f3a1c"

// startFake runs the fake endpoint for the test.
func startFake(t *testing.T, text string) *fakeopenai.Transcriptions {
	t.Helper()
	f, err := fakeopenai.StartTranscriptions("", text, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// client returns a client of cfg whose log lines go to buf (checked for
// the key at the end of the test).
func client(t *testing.T, cfg voice.Config) *voice.Client {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := voice.New(cfg, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if strings.Contains(buf.String(), secretKey) {
			t.Errorf("the API key was logged:\n%s", buf.String())
		}
		t.Logf("client log:\n%s", buf.String())
	})
	return c
}

// grpcStatus runs Transcribe through the service and returns its status.
func grpcStatus(t *testing.T, c *voice.Client, a voice.Audio) (res *pb.TranscribeResponse, code codes.Code, reason, msg string) {
	t.Helper()
	res, err := voice.NewService(c).Transcribe(context.Background(), &pb.TranscribeRequest{Audio: a.Data, MimeType: a.MimeType, Language: a.Language})
	st := status.Convert(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			reason = ei.Reason
		}
	}
	return res, st.Code(), reason, st.Message()
}

var webm = voice.Audio{Data: []byte("\x1aE\xdf\xa3 fake opus audio"), MimeType: "audio/webm;codecs=opus"}

func TestTranscribeSuccess(t *testing.T) {
	f := startFake(t, "  list the files please \n")
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(secretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := client(t, voice.Config{URL: f.Endpoint(), Model: "whisper-large-v3", APIKeyFile: keyFile})
	a := webm
	a.Language = "en"
	res, code, reason, _ := grpcStatus(t, c, a)
	if code != codes.OK {
		t.Fatalf("Transcribe: %v %s", code, reason)
	}
	if res.GetText() != "list the files please" || res.GetModel() != "whisper-large-v3" {
		t.Errorf("answer %q (model %q), want the fake's text trimmed and whisper-large-v3", res.GetText(), res.GetModel())
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the fake received %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if !bytes.Equal(got.Audio, webm.Data) || got.FileType != webm.MimeType || got.FileName != "audio.webm" {
		t.Errorf("the fake received %q (%s, %s), want the recording as audio.webm", got.Audio, got.FileType, got.FileName)
	}
	if got.Model != "whisper-large-v3" || got.Language != "en" || got.ResponseFormat != "json" {
		t.Errorf("form model %q language %q response_format %q", got.Model, got.Language, got.ResponseFormat)
	}
	if got.Authorization != "Bearer "+secretKey {
		t.Errorf("Authorization %q, want the key file's key", got.Authorization)
	}
}

func TestTranscribeNoKeyNoHeader(t *testing.T) {
	f := startFake(t, "")
	c := client(t, voice.Config{URL: f.Endpoint()})
	text, err := c.Transcribe(context.Background(), voice.Audio{Data: []byte("RIFF....WAVE"), MimeType: "audio/wav"})
	if err != nil || text != fakeopenai.DefaultTranscript {
		t.Fatalf("Transcribe: %q, %v", text, err)
	}
	if r := f.Requests()[0]; r.Authorization != "" || r.Model != voice.DefaultModel || r.FileName != "audio.wav" {
		t.Errorf("request: Authorization %q, model %q, file %q; want none, %s, audio.wav", r.Authorization, r.Model, r.FileName, voice.DefaultModel)
	}
}

func TestTranscribeErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		reply       *fakeopenai.TranscriptionReply
		cfg         func(url string) voice.Config
		audio       voice.Audio
		code        codes.Code
		reason      string
		msg         string // in the status message
		reachesFake bool
	}{
		{name: "not configured", cfg: func(string) voice.Config { return voice.Config{} }, audio: webm,
			code: codes.FailedPrecondition, reason: voice.CodeNotConfigured, msg: "voice-transcribe-url"},
		{name: "too large", audio: voice.Audio{Data: make([]byte, voice.MaxAudioBytes+1), MimeType: "audio/webm"},
			code: codes.InvalidArgument, reason: voice.CodeAudioTooLarge, msg: "shorter"},
		{name: "empty", audio: voice.Audio{MimeType: "audio/webm"},
			code: codes.InvalidArgument, reason: voice.CodeAudioUnsupported, msg: "empty"},
		{name: "not audio", audio: voice.Audio{Data: []byte("<html>"), MimeType: "text/html"},
			code: codes.InvalidArgument, reason: voice.CodeAudioUnsupported, msg: "not audio"},
		{name: "no type", audio: voice.Audio{Data: []byte("x")},
			code: codes.InvalidArgument, reason: voice.CodeAudioUnsupported, msg: "audio/"},
		{name: "endpoint 400", reply: &fakeopenai.TranscriptionReply{Status: 400, Message: "Invalid file format."}, audio: webm,
			code: codes.InvalidArgument, reason: voice.CodeAudioUnsupported, msg: "answered 400: Invalid file format.", reachesFake: true},
		{name: "endpoint 401", reply: &fakeopenai.TranscriptionReply{Status: 401, Message: "Incorrect API key provided"}, audio: webm,
			code: codes.Unavailable, reason: voice.CodeTranscriptionFailed, msg: "answered 401: Incorrect API key", reachesFake: true},
		{name: "endpoint 500", reply: &fakeopenai.TranscriptionReply{Status: 500, Message: "The server had an error"}, audio: webm,
			code: codes.Unavailable, reason: voice.CodeTranscriptionFailed, msg: "answered 500", reachesFake: true},
		{name: "endpoint 503", reply: &fakeopenai.TranscriptionReply{Status: 503, Message: "overloaded"}, audio: webm,
			code: codes.Unavailable, reason: voice.CodeTranscriptionFailed, msg: "answered 503: overloaded", reachesFake: true},
		{name: "timeout", reply: &fakeopenai.TranscriptionReply{Delay: -1}, audio: webm,
			cfg:  func(u string) voice.Config { return voice.Config{URL: u, Timeout: 200 * time.Millisecond} },
			code: codes.Unavailable, reason: voice.CodeTranscriptionFailed, msg: "no answer within 200ms", reachesFake: true},
		{name: "unreachable", audio: webm, cfg: func(string) voice.Config { return voice.Config{URL: "http://127.0.0.1:1/v1/audio/transcriptions"} },
			code: codes.Unavailable, reason: voice.CodeTranscriptionFailed, msg: "did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, "")
			if tc.reply != nil {
				f.Enqueue(*tc.reply)
			}
			cfg := voice.Config{URL: f.Endpoint(), APIKey: secretKey}
			if tc.cfg != nil {
				cfg = tc.cfg(f.Endpoint())
			}
			c := client(t, cfg)
			_, code, reason, msg := grpcStatus(t, c, tc.audio)
			if code != tc.code || reason != tc.reason {
				t.Errorf("status %v %s, want %v %s", code, reason, tc.code, tc.reason)
			}
			if !strings.Contains(msg, tc.msg) || strings.Contains(msg, secretKey) {
				t.Errorf("message %q, want it to say %q (and not the key)", msg, tc.msg)
			}
			if n := len(f.Requests()); (n > 0) != tc.reachesFake {
				t.Errorf("the endpoint received %d requests; want some: %v", n, tc.reachesFake)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  voice.Config
		want string // "" valid
	}{
		{"empty is off", voice.Config{}, ""},
		{"https", voice.Config{URL: "https://api.openai.com/v1/audio/transcriptions", APIKey: "k"}, ""},
		{"ftp", voice.Config{URL: "ftp://x/y"}, "want http(s)"},
		{"no host", voice.Config{URL: "http:///v1"}, "want http(s)"},
		{"credentials in the URL", voice.Config{URL: "https://user:" + secretKey + "@h/v1/audio/transcriptions"}, "not in the URL"},
		{"both keys", voice.Config{URL: "https://h/", APIKey: "a", APIKeyFile: "/f"}, "both set"},
		{"model with a space", voice.Config{URL: "https://h/", Model: "a b"}, "no spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), secretKey) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

func TestKeyFileUnreadable(t *testing.T) {
	f := startFake(t, "")
	c := client(t, voice.Config{URL: f.Endpoint(), APIKeyFile: filepath.Join(t.TempDir(), "missing")})
	_, err := c.Transcribe(context.Background(), webm)
	if err == nil || !strings.Contains(err.Error(), "voice-api-key-file") || errors.Is(err, voice.ErrNotConfigured) {
		t.Fatalf("Transcribe with a missing key file: %v", err)
	}
	if len(f.Requests()) != 0 {
		t.Error("the endpoint was called without the key")
	}
}
