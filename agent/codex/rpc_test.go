package codex

import (
	"bufio"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestDecodeLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    kind
		wantErr bool
	}{
		{name: "response", line: `{"id":1,"result":{"userAgent":"x"}}`, want: kindResponse},
		{name: "error response", line: `{"id":7,"error":{"code":-32600,"message":"no active turn to interrupt"}}`, want: kindResponse},
		{name: "notification", line: `{"method":"item/agentMessage/delta","params":{"delta":"hi"},"emittedAtMs":1}`, want: kindNotification},
		{name: "notification without params", line: `{"method":"initialized"}`, want: kindNotification},
		{name: "server request", line: `{"method":"item/fileChange/requestApproval","id":0,"params":{}}`, want: kindRequest},
		{name: "server request with string id", line: `{"method":"x","id":"abc","params":{}}`, want: kindRequest},
		{name: "trailing newline and spaces", line: "  {\"id\":2,\"result\":{}}\r\n", want: kindResponse},
		{name: "error without id", line: `{"error":{"code":-32600,"message":"Already initialized"}}`, wantErr: true},
		{name: "response with string id", line: `{"id":"1","result":{}}`, wantErr: true},
		{name: "request with object id", line: `{"id":{},"method":"x"}`, wantErr: true},
		{name: "id null", line: `{"id":null,"result":{}}`, wantErr: true},
		{name: "empty object", line: `{}`, wantErr: true},
		{name: "not JSON", line: `ERROR codex_app_server: boom`, wantErr: true},
		{name: "array", line: `[1,2]`, wantErr: true},
		{name: "truncated", line: `{"id":1,"result":{`, wantErr: true},
		{name: "empty", line: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, k, err := decodeLine([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && k != tt.want {
				t.Errorf("kind = %d, want %d", k, tt.want)
			}
		})
	}
}

// FuzzDecodeLine feeds arbitrary lines through the decoder, the
// notification and approval decoders and the translator: garbage never
// panics, and a decoded line has a kind.
func FuzzDecodeLine(f *testing.F) {
	seeds := []string{
		`{"id":1,"result":{"userAgent":"betcode/0.169.0"}}`,
		`{"id":3,"error":{"code":-32600,"message":"thread not found"}}`,
		`{"method":"turn/started","params":{"threadId":"t","turn":{"id":"u","status":"inProgress","items":[]}}}`,
		`{"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'ls'","cwd":"/w","status":"inProgress","commandActions":[]},"threadId":"t","turnId":"u"}}`,
		`{"method":"item/completed","params":{"item":{"type":"fileChange","id":"call_2","changes":[{"path":"/w/a","kind":{"type":"add"},"diff":"x\n"}],"status":"completed"},"threadId":"t","turnId":"u"}}`,
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"hi"},"threadId":"t","turnId":"u"}}`,
		`{"method":"item/agentMessage/delta","params":{"threadId":"t","turnId":"u","itemId":"m","delta":"Hel"}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"t","turnId":"u","tokenUsage":{"total":{"totalTokens":2,"inputTokens":1,"cachedInputTokens":0,"outputTokens":1,"reasoningOutputTokens":0},"last":{"totalTokens":2,"inputTokens":1,"cachedInputTokens":0,"outputTokens":1,"reasoningOutputTokens":0}}}}`,
		`{"method":"error","params":{"error":{"message":"x","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":429}}},"willRetry":false,"threadId":"t","turnId":"u"}}`,
		`{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","error":{"message":"boom"},"items":[],"durationMs":5}}}`,
		`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"t","turnId":"u","itemId":"call_1","startedAtMs":1,"command":"ls","cwd":"/w"}}`,
		`{"method":"item/fileChange/requestApproval","id":1,"params":{"threadId":"t","turnId":"u","itemId":"call_2","startedAtMs":1}}`,
		`{"method":"serverRequest/resolved","params":{"threadId":"t","requestId":0}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","durationMs":-5,"exitCode":3}}}`,
		`not json`, `{`, `{"id":null}`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, k, err := decodeLine(line)
		if err != nil {
			return
		}
		c := &Client{approvals: map[string]string{}, log: slog.New(slog.DiscardHandler)}
		tr := NewTranslator("gpt-5.5", nil)
		switch k {
		case kindNotification:
			if ev := c.notification(m); ev != nil {
				tr.Translate(ev)
			}
		case kindRequest:
			if a, err := approvalFrom(m); err == nil && a != nil {
				tr.Translate(a)
			}
		case kindResponse:
		default:
			t.Fatalf("decoded line %q has no kind", line)
		}
	})
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100)
	r := bufio.NewReaderSize(strings.NewReader("{\"a\":1}\n"+long+"\n{\"b\":2}\n"), 16)
	var got []string
	for {
		line, err := readLine(r, 50)
		got = append(got, strings.TrimSpace(string(line)))
		if err != nil {
			break
		}
	}
	want := []string{`{"a":1}`, "", `{"b":2}`, ""}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
