package transcripts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// golden renders events one per line as compact protojson.
func golden(t *testing.T, events []*pb.AgentEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range events {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal %v: %v", ev, err)
		}
		// protojson varies its spacing on purpose; compact it for a stable file.
		if err := json.Compact(&buf, b); err != nil {
			t.Fatal(err)
		}
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func TestImportGolden(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		sessionID string
		cwd       string
		model     string
		messages  int
		badLines  int
		first     string
		last      string
	}{
		{
			name:      "real CLI, text and tool turns",
			file:      realTranscript,
			sessionID: "", // taken from the file below
			model:     "claude-opus-5-5",
			messages:  5,
			first:     "hello there",
			last:      "Tool result received: done",
		},
		{
			name:      "hand-made, garbage lines and CLI-generated entries",
			file:      "garbage.jsonl",
			sessionID: "0b5f2c1e-7a3d-4c8e-9f10-2b3c4d5e6f70",
			cwd:       "/home/dev/proj",
			model:     "claude-test-2",
			// prompts: fix the bug, /review, ünïcödé; assistant: msg_1,
			// msg_2, e1, msg_3, msg_4, msg_5.
			messages: 9,
			badLines: 4,
			first:    "Fix the bug in main.go [image]",
			last:     "no newline at the end",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			imp, err := Import(path)
			if err != nil {
				t.Fatal(err)
			}
			info := imp.Info
			if tt.sessionID != "" && info.SessionID != tt.sessionID {
				t.Errorf("SessionID = %q, want %q", info.SessionID, tt.sessionID)
			}
			if tt.cwd != "" && info.WorkingDirectory != tt.cwd {
				t.Errorf("WorkingDirectory = %q, want %q", info.WorkingDirectory, tt.cwd)
			}
			if info.SessionID == "" || info.WorkingDirectory == "" || info.Path != path {
				t.Errorf("info %+v lacks id, cwd or path", info)
			}
			if imp.Model != tt.model || info.MessageCount != tt.messages || imp.BadLines != tt.badLines {
				t.Errorf("model %q, messages %d, bad lines %d; want %q, %d, %d",
					imp.Model, info.MessageCount, imp.BadLines, tt.model, tt.messages, tt.badLines)
			}
			if info.FirstPrompt != tt.first || info.LastMessagePreview != tt.last {
				t.Errorf("first prompt %q, last message %q; want %q, %q", info.FirstPrompt, info.LastMessagePreview, tt.first, tt.last)
			}

			got := golden(t, imp.Events)
			goldenPath := strings.TrimSuffix(path, ".jsonl") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test -args -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run go test -args -update and review the diff)\ngot:\n%s", goldenPath, got)
			}
		})
	}
}

func TestImportMissingFile(t *testing.T) {
	if _, err := Import(filepath.Join(t.TempDir(), "nope.jsonl")); err == nil {
		t.Fatal("Import of a missing file succeeded")
	}
}

func TestImportHugeLine(t *testing.T) {
	// A line over MaxLineBytes is skipped whole; the lines around it count.
	dir := t.TempDir()
	path := filepath.Join(dir, "x.jsonl")
	huge := `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("a", MaxLineBytes) + `"}}`
	data := `{"type":"user","sessionId":"s","cwd":"/p","message":{"role":"user","content":"one"}}` + "\n" + huge + "\n" +
		`{"type":"user","message":{"role":"user","content":"two"}}` + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	imp, err := Import(path)
	if err != nil {
		t.Fatal(err)
	}
	if imp.BadLines != 1 || imp.Info.MessageCount != 2 || imp.Info.LastMessagePreview != "two" {
		t.Errorf("bad lines %d, info %+v; want 1 bad line and prompts one, two", imp.BadLines, imp.Info)
	}
}

func TestImportLongToolOutput(t *testing.T) {
	out := strings.Repeat("é", MaxToolOutputBytes) // 2 bytes a rune
	raw, _ := json.Marshal(out)
	got := toolOutput(raw)
	cut, _, ok := strings.Cut(got, "\n… [")
	if !ok || len(cut) > MaxToolOutputBytes || !strings.HasPrefix(out, cut) {
		t.Errorf("toolOutput kept %d bytes, marker found %v", len(cut), ok)
	}
}

func TestShorten(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "hi", 5, "hi"},
		{"spaces collapse", "  a \n\t b  ", 5, "a b"},
		{"cut", "abcdef", 3, "abc…"},
		{"cut at space", "abc def", 3, "abc…"},
		{"exact", "abc", 3, "abc"},
		{"runes", "ünïcödé", 3, "ünï…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := shorten(tt.in, tt.n); got != tt.want {
				t.Errorf("shorten(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func TestCleanPrompt(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		ok       bool
	}{
		{"plain", "hello", "hello", true},
		{"reminder only", "<system-reminder>x</system-reminder>", "", false},
		{"reminder around", "<system-reminder>x</system-reminder>\nhello", "hello", true},
		{"unclosed reminder", "hello <system-reminder>x", "hello", true},
		{"interrupt", "[Request interrupted by user]", "", false},
		{"command", "<command-name>/model</command-name><command-args>opus</command-args>", "/model opus", true},
		{"command no args", "<command-name>/clear</command-name>", "/clear", true},
		{"bash mode", "<bash-input>ls -la</bash-input>", "! ls -la", true},
		{"bash output", "<bash-stdout>x</bash-stdout><bash-stderr></bash-stderr>", "", false},
		{"local command", "<local-command-stdout>ok</local-command-stdout>", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := cleanPrompt(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("cleanPrompt(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}
