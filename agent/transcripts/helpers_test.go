package transcripts

import (
	"log/slog"
	"testing"
)

// realTranscript is a transcript the real CLI wrote in TestRealCLITranscript
// (prompts "hello there" and "please RUNTOOL now"); -update refreshes it.
const realTranscript = "real_two_turns.jsonl"

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
