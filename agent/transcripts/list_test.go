package transcripts

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
)

// writeSession copies testdata file src into home as the transcript of id
// under cwd's project folder, last modified at mod.
func writeSession(t *testing.T, home, cwd, id, src string, mod time.Time) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", src))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, filepath.Join(ProjectsDir(home), ProjectKey(cwd), id+".jsonl"), b, mod)
}

func writeFile(t *testing.T, path string, b []byte, mod time.Time) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestList(t *testing.T) {
	home := t.TempDir()
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	realInfo, err := Import(filepath.Join("testdata", realTranscript))
	if err != nil {
		t.Fatal(err)
	}
	realCWD := realInfo.Info.WorkingDirectory

	older := writeSession(t, home, realCWD, "11111111-1111-4111-8111-111111111111", realTranscript, base)
	newer := writeSession(t, home, "/home/dev/proj", "22222222-2222-4222-8222-222222222222", "garbage.jsonl", base.Add(time.Hour))
	// Left out: garbage only (with a warning), empty, not a session
	// name, a subagent transcript in a subfolder.
	proj := filepath.Join(ProjectsDir(home), ProjectKey("/home/dev/proj"))
	writeFile(t, filepath.Join(proj, "33333333-3333-4333-8333-333333333333.jsonl"), []byte("garbage\n{not json\n"), base)
	writeFile(t, filepath.Join(proj, "44444444-4444-4444-8444-444444444444.jsonl"), nil, base)
	writeFile(t, filepath.Join(proj, "notes.jsonl"), []byte(`{"type":"user","message":{"role":"user","content":"x"}}`+"\n"), base)
	writeFile(t, filepath.Join(proj, "22222222-2222-4222-8222-222222222222", "subagents", "55555555-5555-4555-8555-555555555555.jsonl"),
		[]byte(`{"type":"user","message":{"role":"user","content":"x"}}`+"\n"), base)
	if err := os.MkdirAll(filepath.Join(proj, "66666666-6666-4666-8666-666666666666.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}

	l := &Lister{Home: home, Log: testLogger(t)}
	infos, err := l.List("")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Path != newer || infos[1].Path != older {
		t.Fatalf("List = %+v; want %s then %s", infos, newer, older)
	}
	if got := infos[1]; got.SessionID != "11111111-1111-4111-8111-111111111111" || got.WorkingDirectory != realCWD ||
		got.MessageCount != 5 || got.FirstPrompt != "hello there" || !got.UpdatedAt.Equal(base) {
		t.Errorf("older session %+v", got)
	}
	// List stops before a last line without a newline: the CLI may be
	// writing it.
	if got := infos[0]; got.MessageCount != 8 || got.LastMessagePreview != "No response requested." {
		t.Errorf("newer session %+v", got)
	}

	for _, tt := range []struct {
		name, filter string
		want         []string
	}{
		{"by cwd", "/home/dev/proj", []string{newer}},
		{"unclean cwd", "/home/dev/proj/", []string{newer}},
		{"same key, other cwd", "/home/dev-proj", nil},
		{"unknown", "/nowhere", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := List(home, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, i := range got {
				paths = append(paths, i.Path)
			}
			if len(paths) != len(tt.want) || (len(paths) > 0 && paths[0] != tt.want[0]) {
				t.Errorf("List(%q) = %q, want %q", tt.filter, paths, tt.want)
			}
		})
	}

	t.Run("find", func(t *testing.T) {
		got, err := l.Find("11111111-1111-4111-8111-111111111111")
		if err != nil || got != infos[1] {
			t.Errorf("Find = %+v, %v; want %+v", got, err, infos[1])
		}
		for _, id := range []string{uuid.NewString(), "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444", "../x", ""} {
			if _, err := Find(home, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Find(%q) error %v, want ErrNotFound", id, err)
			}
		}
	})
}

func TestListNoHome(t *testing.T) {
	infos, err := List(filepath.Join(t.TempDir(), "none"), "")
	if err != nil || len(infos) != 0 {
		t.Errorf("List of a HOME without transcripts = %v, %v", infos, err)
	}
}

// TestListerResumes checks that a Lister rescans only what was appended and
// ends up where a fresh scan does.
func TestListerResumes(t *testing.T) {
	home := t.TempDir()
	base := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	path := writeSession(t, home, "/p", "11111111-1111-4111-8111-111111111111", realTranscript, base)
	l := &Lister{Home: home, Log: testLogger(t)}
	before, err := l.Find("11111111-1111-4111-8111-111111111111")
	if err != nil {
		t.Fatal(err)
	}

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A half-written line first, finished by the second write.
	if _, err := f.WriteString(`{"type":"user","message":{"role":"user",`); err != nil {
		t.Fatal(err)
	}
	mid, err := l.Find("11111111-1111-4111-8111-111111111111")
	if err != nil || mid.MessageCount != before.MessageCount {
		t.Errorf("after a partial line: %+v, %v; want %d messages", mid, err, before.MessageCount)
	}
	if _, err := f.WriteString(`"content":"third prompt"}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, base.Add(time.Minute), base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	after, err := l.Find("11111111-1111-4111-8111-111111111111")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Find(home, "11111111-1111-4111-8111-111111111111")
	if err != nil {
		t.Fatal(err)
	}
	if after != fresh || after.MessageCount != before.MessageCount+1 || after.LastMessagePreview != "third prompt" {
		t.Errorf("resumed %+v, fresh %+v; want one more message", after, fresh)
	}
}
