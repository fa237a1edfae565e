package transcripts

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzImportLine feeds one arbitrary line after a real prompt: the decoder
// and converter must not panic, and every event must marshal (proto3 strings
// must be valid UTF-8, which the event log relies on). The same bytes as a
// whole file must scan without panicking.
func FuzzImportLine(f *testing.F) {
	for _, name := range []string{realTranscript, "garbage.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			f.Add(bytes.Clone(sc.Bytes()))
		}
	}
	f.Add([]byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"\xff\xfe"}]}}`))
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","input":[1]}]}}`))
	prompt := []byte(`{"type":"user","timestamp":"2026-11-21T10:00:00Z","message":{"role":"user","content":"go"}}`)
	f.Fuzz(func(t *testing.T, line []byte) {
		c := newConverter()
		c.line(prompt)
		c.line(bytes.TrimSpace(line))
		for _, ev := range c.finish(c.sum.info("id", "path", c.first)) {
			if _, err := proto.Marshal(ev); err != nil {
				t.Fatalf("event %v does not marshal: %v", ev, err)
			}
		}
		if _, err := scan(bytes.NewReader(line), summary{}); err != nil {
			t.Fatalf("scan: %v", err)
		}
	})
}
