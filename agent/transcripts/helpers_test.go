package transcripts

import (
	"log/slog"
	"strings"
	"testing"
)

// realTranscript is a transcript the real CLI wrote in TestRealCLITranscript
// (prompts "hello there" and "please RUNTOOL now"); -update refreshes it.
const realTranscript = "real_two_turns.jsonl"

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}
