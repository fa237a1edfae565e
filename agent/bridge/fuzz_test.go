package bridge

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/claude"
)

// FuzzTranslate feeds arbitrary NDJSON through DecodeLine and one
// Translator. Nothing may panic; every event must have a payload; a result
// line ends exactly one turn; and on valid UTF-8 input (all the CLI writes)
// every event must marshal, or the session could not persist it.
func FuzzTranslate(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data) // the whole transcript, so state carries across lines
		for l := range bytes.Lines(data) {
			f.Add(bytes.TrimSuffix(l, []byte("\n")))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		clk := &fakeClock{t: time.Unix(0, 0), step: time.Millisecond}
		tr := New(clk.Now)
		marshal := utf8.Valid(data)
		for l := range bytes.Lines(data) {
			env, err := claude.DecodeLine(bytes.TrimSuffix(l, []byte("\n")))
			if err != nil {
				continue
			}
			evs := tr.Translate(env)
			turns := 0
			for _, ev := range evs {
				if ev == nil || ev.Event == nil {
					t.Fatalf("event without payload from %q", l)
				}
				if ev.GetTurnComplete() != nil {
					turns++
				}
				if marshal {
					if _, err := proto.Marshal(ev); err != nil {
						t.Fatalf("event %s from %q does not marshal: %v", describe(ev), l, err)
					}
				}
			}
			if env.Type == claude.TypeResult && turns != 1 {
				t.Fatalf("result line %q gave %d TurnComplete", l, turns)
			}
		}
	})
}
