package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

type nopWriteCloser struct{ *bytes.Buffer }

func (nopWriteCloser) Close() error { return nil }

func TestConnNextSkipsGarbage(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s1"}`,
		`[SandboxDebug] not json`,
		``,
		`{"type": "user", "message": `,
		`{"no_type":true}`,
		`[1,2,3]`,
		`{"duration_ms":5,"type":"result","is_error":false,"subtype":"success"}`,
		`{"type":"keep_alive"}`,
	}, "\n")
	c := NewConn(nopWriteCloser{&bytes.Buffer{}}, strings.NewReader(in), nil)
	var got []string
	for {
		env, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, env.Type+"/"+env.Subtype)
	}
	want := []string{"system/init", "result/success", "keep_alive/"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
	if c.BadLines() != 4 {
		t.Fatalf("bad lines = %d, want 4", c.BadLines())
	}
}

func TestConnLongLine(t *testing.T) {
	big := strings.Repeat("x", 5<<20) // 5 MiB: far past bufio's default
	line := `{"type":"user","message":{"role":"user","content":"` + big + `"}}`
	c := NewConn(nopWriteCloser{&bytes.Buffer{}}, strings.NewReader(line+"\n"+`{"type":"result"}`+"\n"), nil)
	env, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	if env.Type != "user" || len(env.Raw) != len(line) {
		t.Fatalf("got type %q len %d", env.Type, len(env.Raw))
	}
	if env, err = c.Next(); err != nil || env.Type != "result" {
		t.Fatalf("second line: %v %v", env, err)
	}
}

func TestConnWritesOneValidLinePerMessage(t *testing.T) {
	var out bytes.Buffer
	c := NewConn(nopWriteCloser{&out}, strings.NewReader(""), nil)
	if err := c.SendUser(UserContent{Text: "multi\nline \"quoted\""}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Interrupt(); err != nil {
		t.Fatal(err)
	}
	if err := c.SendControlSuccess("r1", map[string]any{"behavior": "allow"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendUser(UserContent{}, ""); err == nil {
		t.Fatal("empty user message was accepted")
	}
	if err := c.WriteLine([]byte("hello world")); err == nil {
		t.Fatal("non-JSON line was accepted")
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("wrote %d lines: %q", len(lines), out.String())
	}
	var u struct {
		Type    string `json:"type"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &u); err != nil {
		t.Fatal(err)
	}
	if u.Type != "user" || u.Message.Role != "user" || u.Message.Content != "multi\nline \"quoted\"" {
		t.Fatalf("user line = %+v", u)
	}
}

func TestArgsNeverBare(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"new", Options{SessionID: "u1"}, "--session-id u1"},
		{"resume", Options{SessionID: "u1", Resume: true}, "--resume u1"},
		{"model", Options{Model: "sonnet"}, "--model sonnet"},
		{"plan", Options{PermissionMode: "plan"}, "--permission-mode plan"},
		{"max turns", Options{MaxTurns: 3}, "--max-turns 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := strings.Join(tt.o.Args(), " ")
			if !strings.Contains(args, tt.want) {
				t.Errorf("args %q lack %q", args, tt.want)
			}
			for _, must := range []string{"--input-format stream-json", "--output-format stream-json", "--verbose", "--include-partial-messages", "--permission-prompt-tool stdio"} {
				if !strings.Contains(args, must) {
					t.Errorf("args %q lack %q", args, must)
				}
			}
			if strings.Contains(args, "--bare") {
				t.Errorf("args %q contain --bare", args)
			}
		})
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}}`,
		`{"type":"result","is_error":true}`,
		`{"type":"control_request","request_id":"x","request":{"subtype":"can_use_tool"}}`,
		`{`, `[]`, `null`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := DecodeLine(b)
		if err == nil && env.Type == "" {
			t.Fatal("decoded an envelope without type")
		}
		c := NewConn(nopWriteCloser{&bytes.Buffer{}}, bytes.NewReader(b), nil)
		for {
			if _, err := c.Next(); err != nil {
				break
			}
		}
	})
}
