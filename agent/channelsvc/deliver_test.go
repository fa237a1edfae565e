package channelsvc_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/channelsvc"
	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// fakeSessions records what Deliver asks of the agent.
type fakeSessions struct {
	mu      sync.Mutex
	queued  []*pb.QueueMessageRequest
	answers []*pb.AnswerPermissionRequest
}

func (f *fakeSessions) QueueMessage(_ context.Context, r *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued = append(f.queued, r)
	return &pb.QueueMessageResponse{Accepted: true}, nil
}

func (f *fakeSessions) AnswerPermission(_ context.Context, r *pb.AnswerPermissionRequest) (*pb.AnswerPermissionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, r)
	return &pb.AnswerPermissionResponse{}, nil
}

type sealedMachine struct {
	svc      *channelsvc.Service
	sessions *fakeSessions
	dir      string
	now      time.Time
}

func newSealedMachine(t *testing.T) *sealedMachine {
	t.Helper()
	dir := t.TempDir()
	st, err := pairing.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := pairing.OpenSeen(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &sealedMachine{sessions: &fakeSessions{}, dir: dir, now: time.UnixMilli(1_800_000_000_000)}
	m.svc = &channelsvc.Service{Store: st, MachineID: "m-1", Log: slog.New(slog.DiscardHandler),
		Sessions: m.sessions, Seen: seen, Now: func() time.Time { return m.now }}
	return m
}

func (m *sealedMachine) pairKey(t *testing.T, name string) e2ee.KeyPair {
	t.Helper()
	k, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.svc.Store.Add(k.Public, name, ""); err != nil {
		t.Fatal(err)
	}
	return k
}

func (m *sealedMachine) envelope(t *testing.T, device e2ee.KeyPair, s e2ee.Sealed) []byte {
	t.Helper()
	if s.ID == "" {
		s.ID, _ = e2ee.NewSealedID()
	}
	if s.V == 0 {
		s.V = 1
	}
	if s.At == 0 {
		s.At = m.now.UnixMilli()
	}
	b, err := e2ee.SealMessage(device, "m-1", m.svc.Store.Key().Public, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func betcodeCode(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

func queueMsg(text string) e2ee.Sealed {
	return e2ee.Sealed{Kind: e2ee.SealedQueue, SessionID: "s-1", Text: text}
}

func TestDeliverQueueAndPermission(t *testing.T) {
	m := newSealedMachine(t)
	dev := m.pairKey(t, "phone")
	id, _ := e2ee.NewSealedID()
	q := queueMsg("hello")
	q.ID = id
	resp, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: m.envelope(t, dev, q), IdempotencyKey: "outer"})
	if err != nil || !resp.Accepted {
		t.Fatalf("Deliver = %v, %v", resp, err)
	}
	if len(m.sessions.queued) != 1 || m.sessions.queued[0].IdempotencyKey != id || m.sessions.queued[0].Message.GetContent() != "hello" ||
		m.sessions.queued[0].SessionId != "s-1" {
		t.Fatalf("queued %v; want the message with the inner id as its key", m.sessions.queued)
	}
	p := e2ee.Sealed{Kind: e2ee.SealedPermission, SessionID: "s-1", RequestID: "r-1", Behavior: "allow"}
	if _, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: m.envelope(t, dev, p)}); err != nil {
		t.Fatal(err)
	}
	if len(m.sessions.answers) != 1 || m.sessions.answers[0].Response.GetDecision() != pb.PermissionDecision_ALLOW_ONCE ||
		m.sessions.answers[0].Response.GetRequestId() != "r-1" {
		t.Fatalf("answers %v", m.sessions.answers)
	}
}

func TestDeliverRefusals(t *testing.T) {
	m := newSealedMachine(t)
	dev := m.pairKey(t, "phone")
	revoked := m.pairKey(t, "old phone")
	if _, _, err := m.svc.Store.Revoke(e2ee.FingerprintID(revoked.Public)); err != nil {
		t.Fatal(err)
	}
	stranger, _ := e2ee.GenerateKey()
	replayed := m.envelope(t, dev, queueMsg("once"))
	if _, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: replayed}); err != nil {
		t.Fatal(err)
	}
	tampered := m.envelope(t, dev, queueMsg("x"))
	tampered[len(tampered)-1] ^= 1
	otherMachine, _ := e2ee.GenerateKey()
	toOther, _ := e2ee.SealMessage(dev, "m-1", otherMachine.Public, e2ee.Sealed{V: 1, ID: "00112233445566778899aabbccddeeff", At: m.now.UnixMilli(), Kind: "queue", SessionID: "s", Text: "t"})
	badKind, _ := e2ee.Seal(dev, "m-1", m.svc.Store.Key().Public,
		[]byte(`{"v":1,"id":"00112233445566778899aabbccddeeff","at":`+itoa(m.now.UnixMilli())+`,"kind":"exec","session_id":"s-1","text":"rm -rf"}`))
	for _, tc := range []struct {
		name   string
		sealed []byte
		code   codes.Code
		reason string
	}{
		{"unpaired key", m.envelope(t, stranger, queueMsg("x")), codes.PermissionDenied, "DEVICE_NOT_PAIRED"},
		{"revoked key", m.envelope(t, revoked, queueMsg("x")), codes.PermissionDenied, "DEVICE_NOT_PAIRED"},
		{"expired", m.envelope(t, dev, e2ee.Sealed{Kind: "queue", SessionID: "s-1", Text: "x", At: m.now.Add(-channelsvc.SealedMaxAge - time.Second).UnixMilli()}), codes.FailedPrecondition, channelsvc.CodeSealedExpired},
		{"future", m.envelope(t, dev, e2ee.Sealed{Kind: "queue", SessionID: "s-1", Text: "x", At: m.now.Add(channelsvc.SealedMaxFuture + time.Second).UnixMilli()}), codes.FailedPrecondition, channelsvc.CodeSealedExpired},
		{"replay", replayed, codes.AlreadyExists, channelsvc.CodeSealedReplayed},
		{"bad kind", badKind, codes.InvalidArgument, channelsvc.CodeSealedInvalid},
		{"tampered", tampered, codes.InvalidArgument, channelsvc.CodeSealedInvalid},
		{"sealed to another machine", toOther, codes.InvalidArgument, channelsvc.CodeSealedInvalid},
		{"empty", nil, codes.InvalidArgument, channelsvc.CodeSealedInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: tc.sealed})
			if status.Code(err) != tc.code || betcodeCode(err) != tc.reason {
				t.Fatalf("err = %v (%s); want %s / %s", err, betcodeCode(err), tc.code, tc.reason)
			}
		})
	}
	if len(m.sessions.queued) != 1 || len(m.sessions.answers) != 0 {
		t.Fatalf("a refused envelope reached the agent: %d queued, %d answers", len(m.sessions.queued), len(m.sessions.answers))
	}
	// Seven days less a second is still in time.
	if _, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: m.envelope(t, dev,
		e2ee.Sealed{Kind: "queue", SessionID: "s-1", Text: "late", At: m.now.Add(-channelsvc.SealedMaxAge + time.Second).UnixMilli()})}); err != nil {
		t.Fatal(err)
	}
}

// A restarted agent still refuses an envelope it took before.
func TestDeliverReplayAfterRestart(t *testing.T) {
	m := newSealedMachine(t)
	dev := m.pairKey(t, "phone")
	env := m.envelope(t, dev, queueMsg("once"))
	if _, err := m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: env}); err != nil {
		t.Fatal(err)
	}
	seen, err := pairing.OpenSeen(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.svc.Seen = seen
	_, err = m.svc.Deliver(context.Background(), &pb.DeliverRequest{Sealed: env})
	if betcodeCode(err) != channelsvc.CodeSealedReplayed {
		t.Fatalf("after a restart: %v; want SEALED_REPLAYED", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
