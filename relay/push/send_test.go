package push

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func session(id, createdBy string) *pb.SessionSummary {
	return &pb.SessionSummary{Id: id, Name: "fix the build", CreatedBy: createdBy}
}

func permissionEvent(t testing.TB, seq uint64, requestID, tool, command string) *pb.AgentEvent {
	in, err := structpb.NewStruct(map[string]any{"command": command})
	if err != nil {
		t.Fatal(err)
	}
	return &pb.AgentEvent{Sequence: seq, Timestamp: timestamppb.Now(), Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
		RequestId: requestID, ToolName: tool, Description: "run " + command, Input: in,
	}}}
}

func mustPrompt(t *testing.T, machine string, s *pb.SessionSummary, ev *pb.AgentEvent) event {
	t.Helper()
	e, ok := promptEvent(machine, s, ev)
	if !ok {
		t.Fatalf("promptEvent(%v) = false", ev)
	}
	return e
}

// The contract's example payload, byte for byte (docs/web-api.md).
const examplePayload = `{"type":"permission_request","machineId":"m1","sessionId":"s1","requestId":"r1",` +
	`"title":"Bash wants to run","body":"touch hello.txt","tag":"m1/s1/r1","url":"/#/m/m1/s/s1"}`

func TestSendDecrypts(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		ps, sub := e.subscribe(t, "alice")
		defer noSecretsLogged(t, ps)
		e.svc.notify("m1", mustPrompt(t, "m1", session("s1", "alice"), permissionEvent(t, 7, "r1", "Bash", "touch hello.txt")))
		m := e.push.Next(t, 30*time.Second)
		e.waitDelivered(t, 1)
		if string(m.Payload) != examplePayload {
			t.Errorf("payload = %s\nwant      %s", m.Payload, examplePayload)
		}
		_, key := e.svc.Info()
		if m.VAPID.PublicKey != key || m.VAPID.Subject != "mailto:ops@example.com" {
			t.Errorf("VAPID = %+v; want key %s, subject mailto:ops@example.com", m.VAPID, key)
		}
		if m.Urgency != "high" || m.TTL != "3600" || m.Topic != topic("m1/s1/r1") || len(m.Topic) != 32 {
			t.Errorf("headers Urgency=%q TTL=%q Topic=%q; want high, 3600, a 32-character topic", m.Urgency, m.TTL, m.Topic)
		}
		if got := sends(e.svc, KindPermission, OutcomeSent); got != 1 {
			t.Errorf("sends{permission_request,sent} = %v; want 1", got)
		}
		list, err := e.st.PushSubscriptions(t.Context(), "alice")
		if err != nil || len(list) != 1 || list[0].ID != sub.ID || list[0].LastStatus != store.PushSent || list[0].LastAt.IsZero() {
			t.Errorf("subscription after the send = %+v, %v; want last status sent", list, err)
		}

		// The same prompt again (a reconnected watcher's snapshot): claimed
		// already, not sent.
		e.svc.notify("m1", mustPrompt(t, "m1", session("s1", "alice"), permissionEvent(t, 7, "r1", "Bash", "touch hello.txt")))
		e.waitDelivered(t, 1)
		if got := sends(e.svc, KindPermission, OutcomeSuppressed); got != 1 || e.push.Posts() != 1 {
			t.Errorf("repeat: suppressed = %v, posts = %d; want 1, 1", got, e.push.Posts())
		}
	})
}

func TestExpiredSubscription(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		ps, sub := e.subscribe(t, "alice")
		defer noSecretsLogged(t, ps)
		e.push.SetStatus(ps.ID, http.StatusGone)
		e.svc.notify("m1", mustPrompt(t, "m1", session("s1", ""), permissionEvent(t, 3, "r1", "Bash", "ls")))
		e.waitDelivered(t, 1)
		if got := sends(e.svc, KindPermission, OutcomeExpired); got != 1 {
			t.Errorf("sends{expired} = %v; want 1", got)
		}
		list, _ := e.st.PushSubscriptions(t.Context(), "alice")
		if len(list) != 1 || list[0].ID != sub.ID || list[0].LastStatus != store.PushExpired || list[0].LastError == "" {
			t.Fatalf("after 410 subscriptions = %+v; want %s marked expired with the reason", list, sub.ID)
		}
		// Never sent to again: alice has no live subscription.
		posts := e.push.Posts()
		e.svc.notify("m1", mustPrompt(t, "m1", session("s1", ""), permissionEvent(t, 4, "r2", "Bash", "ls")))
		e.waitDelivered(t, 1)
		if e.push.Posts() != posts || sends(e.svc, KindPermission, OutcomeNoSubscription) != 1 {
			t.Errorf("after expiry: posts %d -> %d, no_subscription = %v; want no post, 1", posts, e.push.Posts(), sends(e.svc, KindPermission, OutcomeNoSubscription))
		}
		// Pruned once old enough.
		if n, err := e.st.PrunePush(t.Context(), time.Now().Add(time.Hour)); err != nil || n < 1 {
			t.Errorf("PrunePush = %d, %v", n, err)
		}
		if list, _ := e.st.PushSubscriptions(t.Context(), "alice"); len(list) != 0 {
			t.Errorf("after prune subscriptions = %+v; want none", list)
		}
	})
}

// TestDedupeAcrossReplicas sends one prompt from two services sharing a
// database, as two replicas that both watched the machine during a
// handover: the browser gets it once.
func TestDedupeAcrossReplicas(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		e.subscribe(t, "alice")
		other := e.service(t, open(t), "mailto:ops@example.com")
		other.delivered = e.svc.delivered
		ev := mustPrompt(t, "m1", session("s1", "alice"), permissionEvent(t, 9, "r9", "Edit", "main.go"))
		var wg sync.WaitGroup
		for _, s := range []*Service{e.svc, other} {
			wg.Go(func() { s.notify("m1", ev) })
		}
		wg.Wait()
		e.waitDelivered(t, 2)
		sent := sends(e.svc, KindPermission, OutcomeSent) + sends(other, KindPermission, OutcomeSent)
		suppressed := sends(e.svc, KindPermission, OutcomeSuppressed) + sends(other, KindPermission, OutcomeSuppressed)
		if sent != 1 || suppressed != 1 || e.push.Posts() != 1 || len(e.push.Messages()) != 1 {
			t.Errorf("sent %v, suppressed %v, posts %d, delivered %d; want exactly one delivery", sent, suppressed, e.push.Posts(), len(e.push.Messages()))
		}
	})
}

func TestKindsAndRecipients(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		e := newEnv(t, open)
		ctx := t.Context()
		// Team machine m2: alice and bob are members, carol was never one,
		// dave is disabled.
		for _, u := range []string{"carol", "dave"} {
			must(t, e.st.CreateUser(ctx, store.User{ID: u}))
		}
		must(t, e.st.CreateTeam(ctx, store.Team{ID: "team"}))
		for _, u := range []string{"alice", "bob", "dave"} {
			must(t, e.st.SetMember(ctx, store.Member{TeamID: "team", UserID: u, Role: store.RoleMember}))
		}
		must(t, e.st.SetUserDisabled(ctx, "dave", true))
		must(t, e.st.UpsertMachine(ctx, store.Machine{ID: "m2", OwnerID: "alice", TeamID: "team"}))

		tests := []struct {
			name, machine, createdBy string
			want                     []string
		}{
			{"creator who may reach the machine", "m2", "bob", []string{"bob"}},
			{"creator who may not: everyone who may", "m2", "carol", []string{"alice", "bob"}},
			{"no creator: the team", "m2", "", []string{"alice", "bob"}},
			{"personal machine: its owner", "m1", "", []string{"alice"}},
			{"personal machine, another user created it", "m1", "bob", []string{"alice"}},
		}
		for _, tt := range tests {
			got, err := e.svc.recipients(ctx, tt.machine, tt.createdBy)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("%s: recipients = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		}

		// A subscription that wants only questions is not sent a
		// permission request.
		e.subscribe(t, "bob", KindQuestion)
		e.svc.notify("m2", mustPrompt(t, "m2", session("s1", "bob"), permissionEvent(t, 1, "r1", "Bash", "ls")))
		e.waitDelivered(t, 1)
		if sends(e.svc, KindPermission, OutcomeSuppressed) != 1 || e.push.Posts() != 0 {
			t.Errorf("opted-out kind: suppressed %v, posts %d; want 1, 0", sends(e.svc, KindPermission, OutcomeSuppressed), e.push.Posts())
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestEvents(t *testing.T) {
	s := session("s1", "alice")
	s.LastMessagePreview = "All tests pass."
	turn := func(seq uint64, reason string) *pb.AgentEvent {
		return &pb.AgentEvent{Sequence: seq, Event: &pb.AgentEvent_TurnComplete{TurnComplete: &pb.TurnComplete{StopReason: reason}}}
	}
	fatal := &pb.AgentEvent{Sequence: 12, Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Code: "CLAUDE_CRASHED", Message: "exit status 1", IsFatal: true}}}
	question := &pb.AgentEvent{Sequence: 5, Event: &pb.AgentEvent_UserQuestion{UserQuestion: &pb.UserQuestion{QuestionId: "q1", Question: "Which\nbranch?"}}}
	tests := []struct {
		name string
		ev   *pb.AgentEvent
		want *Notification // nil: none
		key  string
	}{
		{"permission", permissionEvent(t, 4, "r1", "Bash", "touch hello.txt"),
			&Notification{Type: KindPermission, RequestID: "r1", Title: "Bash wants to run", Body: "touch hello.txt", Tag: "m1/s1/r1"}, "m1/s1/r1"},
		{"question", question,
			&Notification{Type: KindQuestion, RequestID: "q1", Title: "Claude asks: fix the build", Body: "Which branch?", Tag: "m1/s1/q1"}, "m1/s1/q1"},
		{"turn complete", turn(10, "end_turn"),
			&Notification{Type: KindTurnComplete, Title: "Turn finished: fix the build", Body: "All tests pass.", Tag: "m1/s1"}, "m1/s1/turn/10"},
		{"turn error", turn(11, "error"),
			&Notification{Type: KindTurnFailed, Title: "Turn failed: fix the build", Body: "stopped: error", Tag: "m1/s1"}, "m1/s1/turn/11"},
		{"fatal error", fatal,
			&Notification{Type: KindTurnFailed, Title: "Turn failed: fix the build", Body: "CLAUDE_CRASHED: exit status 1", Tag: "m1/s1"}, "m1/s1/turn/12"},
		{"cancelled", turn(13, "cancelled"), nil, ""},
		{"non-fatal error", &pb.AgentEvent{Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{Message: "retrying"}}}, nil, ""},
		{"text", &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "hi"}}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := promptEvent("m1", s, tt.ev)
			if !ok {
				e, ok = turnEvent("m1", s, tt.ev)
			}
			if tt.want == nil {
				if ok {
					t.Fatalf("got %+v; want no notification", e.n)
				}
				return
			}
			want := *tt.want
			want.MachineID, want.SessionID, want.URL = "m1", "s1", "/#/m/m1/s/s1"
			if !ok || e.n != want || e.key != tt.key || e.createdBy != "alice" {
				got, _ := json.Marshal(e.n)
				t.Errorf("got %s key %q (ok=%v); want %+v key %q", got, e.key, ok, want, tt.key)
			}
		})
	}
}
