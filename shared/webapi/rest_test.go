package webapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// call makes one request; body is JSON-encoded unless it is a string.
func (ts *testServer) call(t *testing.T, method, path, token string, body any, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

func TestRESTErrors(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.addSession(&pb.SessionSummary{Id: "s1"})
	big := `{"prompt":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	files := make([]FileAttachment, MaxFiles+1)
	tests := []struct {
		name         string
		method, path string
		token        string
		body         any
		failWith     error
		status       int
		code         string
	}{
		{name: "no token", method: "GET", path: "/api/sessions", status: 401, code: "UNAUTHENTICATED"},
		{name: "bad token", method: "GET", path: "/api/sessions", token: "bct_bad", status: 401, code: "UNAUTHENTICATED"},
		{name: "bad token on me", method: "GET", path: "/api/me", token: "bct_bad", status: 401, code: "UNAUTHENTICATED"},
		{name: "unknown session", method: "GET", path: "/api/sessions/nope", token: goodToken, status: 404, code: "SESSION_NOT_FOUND"},
		{name: "unknown session events", method: "GET", path: "/api/sessions/nope/events", token: goodToken, status: 404, code: "SESSION_NOT_FOUND"},
		{name: "malformed JSON", method: "POST", path: "/api/sessions/s1/messages", token: goodToken, body: "{nope", status: 400, code: "INVALID_ARGUMENT"},
		{name: "body too large", method: "POST", path: "/api/sessions/s1/messages", token: goodToken, body: big, status: 413, code: "BODY_TOO_LARGE"},
		{name: "too many files", method: "POST", path: "/api/sessions/s1/messages", token: goodToken,
			body: map[string]any{"prompt": "hi", "files": files}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "bad behavior", method: "POST", path: "/api/sessions/s1/permissions/r1", token: goodToken,
			body: map[string]any{"behavior": "maybe"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "pool exhausted", method: "POST", path: "/api/sessions", token: goodToken, body: map[string]any{"cwd": "/tmp"},
			failWith: betcodeErr(codes.ResourceExhausted, "POOL_EXHAUSTED", "busy", map[string]string{"retry_after_ms": "1500"}), status: 429, code: "POOL_EXHAUSTED"},
		{name: "unimplemented", method: "GET", path: "/api/sessions", token: goodToken,
			failWith: status.Error(codes.Unimplemented, "no"), status: 501, code: "UNIMPLEMENTED"},
		{name: "machine offline", method: "GET", path: "/api/sessions", token: goodToken,
			failWith: status.Error(codes.Unavailable, "offline"), status: 503, code: "UNAVAILABLE"},
		{name: "deadline", method: "GET", path: "/api/sessions", token: goodToken,
			failWith: status.Error(codes.DeadlineExceeded, "slow"), status: 504, code: "DEADLINE_EXCEEDED"},
		{name: "unknown API path", method: "GET", path: "/api/nothing", token: goodToken, status: 404, code: "NOT_FOUND"},
		{name: "push on the agent", method: "GET", path: "/api/push", token: goodToken, status: 404, code: "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts.fake.mu.Lock()
			ts.fake.failWith = tt.failWith
			ts.fake.mu.Unlock()
			st, hdr, body := ts.call(t, tt.method, tt.path, tt.token, tt.body)
			e := decode[errorBody](t, body)
			if st != tt.status || e.Code != tt.code || e.Error == "" {
				t.Fatalf("%s %s = %d %s, want %d %s", tt.method, tt.path, st, body, tt.status, tt.code)
			}
			if tt.status == 429 && hdr.Get("Retry-After") != "2" {
				t.Errorf("Retry-After = %q, want 2", hdr.Get("Retry-After"))
			}
			if hdr.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("security headers missing: %v", hdr)
			}
		})
	}
}

func TestRESTForwardsCredentials(t *testing.T) {
	ts := newTestServer(t, Options{Role: RoleRelay})
	st, _, body := ts.call(t, "GET", "/api/sessions", goodToken, nil, "X-Betcode-Machine", "m7")
	if st != 200 {
		t.Fatalf("GET /api/sessions = %d %s", st, body)
	}
	md := ts.fake.metadata()
	if got := md.Get("x-betcode-machine-id"); len(got) != 1 || got[0] != "m7" {
		t.Errorf("x-betcode-machine-id = %v, want m7", got)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+goodToken {
		t.Errorf("authorization = %v", got)
	}
	if got := md.Get("x-betcode-client-version"); len(got) != 1 || got[0] != "9.9.9" {
		t.Errorf("x-betcode-client-version = %v", got)
	}
}

func TestRESTSessions(t *testing.T) {
	ts := newTestServer(t, Options{})
	old := timestamppb.New(timestamppb.Now().AsTime().Add(-60e9))
	ts.fake.addSession(&pb.SessionSummary{Id: "idle", UpdatedAt: timestamppb.Now(), LastStopReason: "end_turn", MessageCount: 2})
	ts.fake.addSession(&pb.SessionSummary{Id: "asking", UpdatedAt: old, PendingPrompts: 1, AgentStatus: pb.AgentStatus_WAITING_FOR_USER})

	st, _, body := ts.call(t, "GET", "/api/sessions", goodToken, nil)
	list := decode[[]Session](t, body)
	if st != 200 || len(list) != 2 || list[0].ID != "asking" || list[0].Status != "waiting" || list[1].Status != "completed" {
		t.Fatalf("sessions = %d %s", st, body)
	}

	data := []byte("\x89PNG binary")
	st, _, body = ts.call(t, "POST", "/api/sessions", goodToken, map[string]any{"cwd": "/w", "prompt": "hi", "name": "n",
		"files": []FileAttachment{{Name: "a.png", MimeType: "image/png", Base64Data: "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)}}})
	s := decode[Session](t, body)
	if st != 201 || s.ID == "" || s.Cwd != "/w" || s.Name != "n" || s.Status != "running" {
		t.Fatalf("create = %d %s", st, body)
	}
	ts.fake.mu.Lock()
	q := ts.fake.queued[len(ts.fake.queued)-1]
	ts.fake.mu.Unlock()
	if q.Message.Content != "hi" || len(q.Message.Attachments) != 1 || !bytes.Equal(q.Message.Attachments[0].Data, data) {
		t.Fatalf("StartSession message = %v", q.Message)
	}

	st, _, body = ts.call(t, "POST", "/api/sessions/idle/messages", goodToken, map[string]any{"prompt": "more", "idempotencyKey": "k"})
	if st != 202 || !strings.Contains(string(body), `"sequence":`) {
		t.Fatalf("message = %d %s", st, body)
	}

	for range 3 {
		ts.fake.appendEvent("idle", &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "x"}}})
	}
	st, _, body = ts.call(t, "GET", "/api/sessions/idle/events?after=1", goodToken, nil)
	evs := decode[[]Event](t, body)
	if st != 200 || len(evs) != 2 || evs[0]["seq"] != 2.0 || evs[0]["type"] != "lead_output" {
		t.Fatalf("events = %d %s", st, body)
	}

	st, _, body = ts.call(t, "POST", "/api/sessions/idle/permissions/r1", goodToken, map[string]any{"behavior": "allowSession", "updatedInput": map[string]any{"command": "ls"}})
	if st != 200 {
		t.Fatalf("answer = %d %s", st, body)
	}
	ts.fake.mu.Lock()
	a := ts.fake.answers[0].Response
	ts.fake.mu.Unlock()
	if a.Decision != pb.PermissionDecision_ALLOW_SESSION || a.UpdatedInput.AsMap()["command"] != "ls" {
		t.Fatalf("AnswerPermission = %v", a)
	}
	st, _, body = ts.call(t, "POST", "/api/sessions/idle/permissions/r1", goodToken, map[string]any{"behavior": "deny"})
	if e := decode[errorBody](t, body); st != 409 || e.Code != "PERMISSION_NOT_PENDING" {
		t.Fatalf("second answer = %d %s", st, body)
	}

	st, _, body = ts.call(t, "GET", "/api/usage", goodToken, nil)
	if st != 200 || !strings.Contains(string(body), `"total":`) {
		t.Fatalf("usage = %d %s", st, body)
	}
	st, _, body = ts.call(t, "GET", "/api/machines", goodToken, nil)
	if m := decode[[]Machine](t, body); st != 200 || len(m) != 1 || !m[0].Current || !m[0].Online {
		t.Fatalf("machines = %d %s", st, body)
	}
}

// TestRESTSessionProvider checks POST /api/sessions's provider: absent is
// the agent's default (Claude Code), a known name reaches StartSession,
// an unknown one is refused before the agent is asked; the session JSON
// names its provider.
func TestRESTSessionProvider(t *testing.T) {
	tests := []struct {
		name     string
		body     map[string]any
		status   int
		sent     pb.SessionProvider // what StartSession got
		provider string             // the created session's provider
		code     string             // the error code, for a refusal
	}{
		{name: "default", body: map[string]any{"cwd": "/w"}, status: 201,
			sent: pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, provider: "claude-code"},
		{name: "claude-code", body: map[string]any{"cwd": "/w", "provider": "claude-code"}, status: 201,
			sent: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, provider: "claude-code"},
		{name: "claude alias", body: map[string]any{"cwd": "/w", "provider": "claude"}, status: 201,
			sent: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, provider: "claude-code"},
		{name: "codex", body: map[string]any{"cwd": "/w", "provider": "codex"}, status: 201,
			sent: pb.SessionProvider_SESSION_PROVIDER_CODEX, provider: "codex"},
		{name: "unknown", body: map[string]any{"cwd": "/w", "provider": "gpt-shell"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "enum name is not a web name", body: map[string]any{"cwd": "/w", "provider": "SESSION_PROVIDER_CODEX"}, status: 400, code: "INVALID_ARGUMENT"},
		{name: "not a string", body: map[string]any{"cwd": "/w", "provider": 3}, status: 400, code: "INVALID_ARGUMENT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, Options{})
			st, _, body := ts.call(t, "POST", "/api/sessions", goodToken, tc.body)
			ts.fake.mu.Lock()
			started := slices.Clone(ts.fake.started)
			ts.fake.mu.Unlock()
			if st != tc.status {
				t.Fatalf("create = %d %s, want %d", st, body, tc.status)
			}
			if tc.code != "" {
				if e := decode[errorBody](t, body); e.Code != tc.code || len(started) != 0 {
					t.Fatalf("create = %s (%d StartSession calls), want code %s and no call", body, len(started), tc.code)
				}
				return
			}
			if len(started) != 1 || started[0].Provider != tc.sent {
				t.Fatalf("StartSession got %v, want provider %v", started, tc.sent)
			}
			if s := decode[Session](t, body); s.Provider != tc.provider {
				t.Fatalf("created session provider %q, want %q", s.Provider, tc.provider)
			}
			path := "/api/sessions/" + decode[Session](t, body).ID
			st, _, body = ts.call(t, "GET", path, goodToken, nil)
			if s := decode[Session](t, body); st != 200 || s.Provider != tc.provider {
				t.Fatalf("GET %s = %d %s, want provider %q", path, st, body, tc.provider)
			}
			st, _, body = ts.call(t, "GET", "/api/sessions", goodToken, nil)
			if l := decode[[]Session](t, body); st != 200 || len(l) != 1 || l[0].Provider != tc.provider {
				t.Fatalf("GET /api/sessions = %d %s, want provider %q", st, body, tc.provider)
			}
		})
	}
}

func TestProviderNames(t *testing.T) {
	for p := range pb.SessionProvider_name {
		kind := pb.SessionProvider(p)
		name := providerName(kind)
		got, err := parseProvider(name)
		if kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
			kind = pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE // sessions from before providers
		}
		if err != nil || got != kind {
			t.Errorf("parseProvider(providerName(%v) = %q) = %v, %v", kind, name, got, err)
		}
	}
}

func TestPermissionRules(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.fake.external = []string{"Read(~/**)"}
	st, _, body := ts.call(t, "POST", "/api/permission-rules", goodToken, map[string]any{"toolName": "Bash", "pathPattern": "go test *", "behavior": "allow"})
	r := decode[PermissionRule](t, body)
	if st != 201 || r.Rule != "Bash(go test *)" || r.ID == "" || r.Source != sourceAgent {
		t.Fatalf("add = %d %s", st, body)
	}
	ts.call(t, "POST", "/api/permission-rules", goodToken, map[string]any{"toolName": "Bash", "pathPattern": "rm *", "behavior": "deny"})
	st, _, body = ts.call(t, "GET", "/api/permission-rules", goodToken, nil)
	rules := decode[[]PermissionRule](t, body)
	if st != 200 || len(rules) != 3 {
		t.Fatalf("rules = %d %s", st, body)
	}
	var ext PermissionRule
	for _, x := range rules {
		if x.Source == sourceExternal {
			ext = x
		}
	}
	if ext.ToolName != "Read" || ext.PathPattern != "~/**" || ext.Behavior != "allow" {
		t.Fatalf("external rule = %+v", ext)
	}
	if st, _, body := ts.call(t, "DELETE", "/api/permission-rules/"+ext.ID, goodToken, nil); st != 409 || decode[errorBody](t, body).Code != "RULE_READ_ONLY" {
		t.Fatalf("delete external = %d %s", st, body)
	}
	if st, _, body := ts.call(t, "DELETE", "/api/permission-rules/"+r.ID, goodToken, nil); st != 204 {
		t.Fatalf("delete = %d %s", st, body)
	}
	if st, _, _ := ts.call(t, "DELETE", "/api/permission-rules/"+r.ID, goodToken, nil); st != 404 {
		t.Fatalf("delete again = %d, want 404", st)
	}
	ts.fake.mu.Lock()
	defer ts.fake.mu.Unlock()
	if len(ts.fake.allow) != 0 || len(ts.fake.deny) != 1 || ts.fake.deny[0] != "Bash(rm *)" {
		t.Fatalf("agent settings: allow %v deny %v", ts.fake.allow, ts.fake.deny)
	}
}

func TestHealthAndInfo(t *testing.T) {
	ts := newTestServer(t, Options{Role: RoleRelay, PushInfo: func() (bool, string) { return true, "BKey" }})
	st, _, body := ts.call(t, "GET", "/api/health", "", nil)
	h := decode[map[string]string](t, body)
	if st != 200 || h["status"] != "ok" || h["role"] != "relay" || h["version"] != "9.9.9" || h["timestamp"] == "" {
		t.Fatalf("health = %d %s", st, body)
	}
	st, _, body = ts.call(t, "GET", "/api/info", "", nil)
	i := decode[map[string]any](t, body)
	if st != 200 || i["push"] != true || i["vapidPublicKey"] != "BKey" {
		t.Fatalf("info = %d %s", st, body)
	}
}

func TestEventOfSubagentTask(t *testing.T) {
	ev := &pb.AgentEvent{Sequence: 7, ParentToolUseId: "toolu_outer", Event: &pb.AgentEvent_SubagentTask{SubagentTask: &pb.SubagentTaskUpdate{
		ToolUseId: "toolu_1", TaskId: "a8b1", Status: pb.SubagentTaskStatus_SUBAGENT_TASK_STATUS_COMPLETED, Description: "Research OAuth",
		SubagentType: "general-purpose", IsBackgrounded: true, Summary: "The report.", TotalTokens: 32, ToolUses: 1, DurationMs: 867,
	}}}
	got := eventOf("s", ev)
	want := Event{
		"sessionId": "s", "seq": uint64(7), "ts": "", "parentToolUseId": "toolu_outer", "type": "subagent_task",
		"toolUseId": "toolu_1", "taskId": "a8b1", "status": "completed", "description": "Research OAuth", "subagentType": "general-purpose",
		"background": true, "summary": "The report.", "error": "", "activity": "", "lastToolName": "",
		"totalTokens": uint64(32), "toolUses": uint32(1), "durationMs": uint64(867),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("eventOf = %v\nwant      %v", got, want)
	}
}

func TestEventOfEveryKind(t *testing.T) {
	// Every stored AgentEvent kind maps to a message, so that streams have
	// no gaps in seq; only deprecation warnings (seq 0) are dropped.
	oneof := (&pb.AgentEvent{}).ProtoReflect().Descriptor().Oneofs().ByName("event")
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		ev := &pb.AgentEvent{Sequence: 1}
		m := ev.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		e := eventOf("s", ev)
		if fd.Name() == "deprecation_warning" {
			if e != nil {
				t.Errorf("deprecation_warning mapped to %v", e)
			}
			continue
		}
		if e == nil || e["type"] == nil || e["type"] == "unknown" {
			t.Errorf("AgentEvent.%s has no web message", fd.Name())
		}
	}
}
