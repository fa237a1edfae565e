package share

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// fakeRelay issues share tokens and records revocations.
type fakeRelay struct {
	mu      sync.Mutex
	issued  []string
	revoked []string
	fail    error
}

func (r *fakeRelay) Addr() string { return "relay.example:443" }

func (r *fakeRelay) IssueShareToken(_ context.Context, name, user string, _ time.Time) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return "", "", r.fail
	}
	r.issued = append(r.issued, user)
	return "bct_share_" + name, "tok-" + name, nil
}

func (r *fakeRelay) RevokeDeviceToken(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revoked = append(r.revoked, id)
	return nil
}

// closer records that it was closed.
type closer struct{ done chan struct{} }

func (c *closer) Close() error {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	return nil
}

type fixture struct {
	svc     *Service
	devices *pairing.Store
	grants  *Store
	relay   *fakeRelay
	dir     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	devices, err := pairing.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRelay{}
	svc := &Service{Grants: grants, Devices: devices, MachineID: "m-1", Relay: r, Log: slog.New(slog.DiscardHandler),
		SessionExists: func(_ context.Context, id string) error {
			if id == "s-1" || id == "s-2" {
				return nil
			}
			return errors.New("no such session")
		}}
	return &fixture{svc: svc, devices: devices, grants: grants, relay: r, dir: dir}
}

// pairWith pairs a new device with a share's code, as channelsvc.Pair does.
func (f *fixture) pairWith(t *testing.T, code string) (pairing.Device, e2ee.Addr) {
	t.Helper()
	c, err := e2ee.ParsePairingCode(code)
	if err != nil {
		t.Fatal(err)
	}
	o, err := f.devices.Take(c.Offer)
	if err != nil || o.Share == nil {
		t.Fatalf("the share's offer: %+v %v", o, err)
	}
	key, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.devices.AddShare(key.Public, "teammate", o.Share)
	if err != nil {
		t.Fatal(err)
	}
	return d, e2ee.Addr{Role: e2ee.RoleDevice, MachineID: "m-1", Fingerprint: d.Fingerprint}
}

func (f *fixture) share(t *testing.T, mode pb.ShareMode, until time.Duration) *pb.CreateShareResponse {
	t.Helper()
	resp, err := f.svc.CreateShare(t.Context(), &pb.CreateShareRequest{SessionId: "s-1", User: "bob", Mode: mode,
		ExpiresAt: timestamppb.New(time.Now().Add(until))})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.Reason
		}
	}
	return ""
}

func TestCreateShareCode(t *testing.T) {
	f := newFixture(t)
	resp := f.share(t, pb.ShareMode_SHARE_MODE_READ, time.Hour)
	c, err := e2ee.ParsePairingCode(resp.Code)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := c.ShareUser(); !ok || u != "bob" || c.MachineID != "m-1" || c.Relay != "relay.example:443" || c.Fingerprint != f.devices.Fingerprint() {
		t.Fatalf("share code %+v", c)
	}
	if resp.Share.Mode != pb.ShareMode_SHARE_MODE_READ || resp.Share.User != "bob" || resp.Share.SessionId != "s-1" {
		t.Fatalf("share %+v", resp.Share)
	}
	// The grant survives a restart.
	again, err := Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := again.Get(resp.Share.Id); !ok || g.TokenID != "tok-"+resp.Share.Id || g.Mode != ModeRead {
		t.Fatalf("stored grant %+v", g)
	}
	for _, tc := range []struct {
		name string
		req  *pb.CreateShareRequest
		code codes.Code
	}{
		{"no session", &pb.CreateShareRequest{User: "bob"}, codes.InvalidArgument},
		{"no user", &pb.CreateShareRequest{SessionId: "s-1"}, codes.InvalidArgument},
		{"a user with a space", &pb.CreateShareRequest{SessionId: "s-1", User: "bob smith"}, codes.InvalidArgument},
		{"an unknown mode", &pb.CreateShareRequest{SessionId: "s-1", User: "bob", Mode: 9}, codes.InvalidArgument},
		{"in the past", &pb.CreateShareRequest{SessionId: "s-1", User: "bob", ExpiresAt: timestamppb.New(time.Now().Add(-time.Minute))}, codes.InvalidArgument},
		{"too long", &pb.CreateShareRequest{SessionId: "s-1", User: "bob", ExpiresAt: timestamppb.New(time.Now().Add(MaxTTL + time.Hour))}, codes.InvalidArgument},
		{"no such session", &pb.CreateShareRequest{SessionId: "s-9", User: "bob"}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.svc.CreateShare(t.Context(), tc.req); status.Code(err) != tc.code {
				t.Fatalf("CreateShare: %v; want %s", err, tc.code)
			}
		})
	}
	t.Run("the relay's refusal passes through", func(t *testing.T) {
		f.relay.fail = status.Error(codes.NotFound, "no user carol on this relay")
		defer func() { f.relay.fail = nil }()
		if _, err := f.svc.CreateShare(t.Context(), &pb.CreateShareRequest{SessionId: "s-1", User: "carol"}); status.Code(err) != codes.NotFound {
			t.Fatalf("CreateShare for an unknown user: %v", err)
		}
	})
}

// TestGate: a share's device may watch its session (and answer in answer
// mode) and nothing else; other connections pass.
func TestGate(t *testing.T) {
	f := newFixture(t)
	read := f.share(t, pb.ShareMode_SHARE_MODE_READ, time.Hour)
	_, readAddr := f.pairWith(t, read.Code)
	answer := f.share(t, pb.ShareMode_SHARE_MODE_ANSWER, time.Hour)
	_, answerAddr := f.pairWith(t, answer.Code)
	gate := &Gate{Devices: f.devices, Grants: f.grants}
	owner, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ownerDev, err := f.devices.Add(owner.Public, "owner's phone", "")
	if err != nil {
		t.Fatal(err)
	}
	ownerAddr := e2ee.Addr{Role: e2ee.RoleDevice, Fingerprint: ownerDev.Fingerprint}

	const (
		resume  = "/betcode.v1.AgentService/ResumeSession"
		answerP = "/betcode.v1.AgentService/AnswerPermission"
		start   = "/betcode.v1.AgentService/StartSession"
		list    = "/betcode.v1.ShareService/ListShares"
		devs    = "/betcode.v1.DeviceService/ListDevices"
	)
	for _, tc := range []struct {
		name   string
		addr   e2ee.Addr
		method string
		req    any
		want   string // "" passes, else the BetCode code
	}{
		{"read: its session's permission log", readAddr, "/betcode.v1.AgentService/ListPermissionLog", &pb.PermissionLogRequest{SessionId: "s-1"}, ""},
		{"read: another session", readAddr, "/betcode.v1.AgentService/ListPermissionLog", &pb.PermissionLogRequest{SessionId: "s-2"}, CodeShareScope},
		{"read: answer", readAddr, answerP, &pb.AnswerPermissionRequest{SessionId: "s-1"}, CodeShareScope},
		{"read: start a session", readAddr, start, &pb.StartSessionRequest{}, CodeShareScope},
		{"read: list shares", readAddr, list, &pb.ListSharesRequest{}, CodeShareScope},
		{"read: list devices", readAddr, devs, &pb.ListDevicesRequest{}, CodeShareScope},
		{"read: version", readAddr, "/betcode.v1.VersionService/GetVersion", &pb.GetVersionRequest{}, ""},
		{"answer: answer its session", answerAddr, answerP, &pb.AnswerPermissionRequest{SessionId: "s-1"}, ""},
		{"answer: answer another session", answerAddr, answerP, &pb.AnswerPermissionRequest{SessionId: "s-2"}, CodeShareScope},
		{"answer: settings", answerAddr, "/betcode.v1.ConfigService/GetSettings", &pb.GetVersionRequest{}, CodeShareScope},
		{"owner's device: anything", ownerAddr, start, &pb.StartSessionRequest{}, ""},
		{"read: list sessions (filtered)", readAddr, "/betcode.v1.AgentService/ListSessions", &pb.ListSessionsRequest{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := peer.NewContext(t.Context(), &peer.Peer{Addr: tc.addr})
			called := false
			_, err := gate.UnaryInterceptor(ctx, tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(context.Context, any) (any, error) {
				called = true
				return nil, nil
			})
			switch {
			case tc.want == "" && (err != nil || !called):
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (called || status.Code(err) != codes.PermissionDenied || reason(err) != tc.want):
				t.Fatalf("%v (handler called %v); want PERMISSION_DENIED %s", err, called, tc.want)
			}
		})
	}
	t.Run("session lists show the shared session only", func(t *testing.T) {
		ctx := peer.NewContext(t.Context(), &peer.Peer{Addr: readAddr})
		resp, err := gate.UnaryInterceptor(ctx, &pb.ListSessionsRequest{}, &grpc.UnaryServerInfo{FullMethod: "/betcode.v1.AgentService/ListSessions"},
			func(context.Context, any) (any, error) {
				return &pb.ListSessionsResponse{Sessions: []*pb.SessionSummary{{Id: "s-2"}, {Id: "s-1"}}, Total: 2}, nil
			})
		if l := resp.(*pb.ListSessionsResponse); err != nil || len(l.Sessions) != 1 || l.Sessions[0].Id != "s-1" || l.Total != 1 {
			t.Fatalf("ListSessions: %v %v", resp, err)
		}
		var sent []string
		ss := &fakeStream{ctx: ctx, msg: &pb.ResumeSessionRequest{}, sent: &sent}
		err = gate.StreamInterceptor(nil, ss, &grpc.StreamServerInfo{FullMethod: "/betcode.v1.AgentService/WatchSessions"}, func(_ any, s grpc.ServerStream) error {
			for _, u := range []*pb.SessionUpdate{{Session: &pb.SessionSummary{Id: "s-2"}}, {Session: &pb.SessionSummary{Id: "s-1"}}, {SnapshotDone: true}} {
				if err := s.SendMsg(u); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || strings.Join(sent, ",") != "s-1," {
			t.Fatalf("WatchSessions sent %q, %v; want the shared session and the snapshot's end", sent, err)
		}
	})
	t.Run("a stream naming another session", func(t *testing.T) {
		ctx := peer.NewContext(t.Context(), &peer.Peer{Addr: readAddr})
		ss := &fakeStream{ctx: ctx, msg: &pb.ResumeSessionRequest{SessionId: "s-2"}}
		err := gate.StreamInterceptor(nil, ss, &grpc.StreamServerInfo{FullMethod: resume}, func(_ any, s grpc.ServerStream) error {
			return s.RecvMsg(&pb.ResumeSessionRequest{})
		})
		if reason(err) != CodeShareScope {
			t.Fatalf("ResumeSession of another session: %v", err)
		}
	})
	t.Run("a revoked share ends every call", func(t *testing.T) {
		if _, err := f.svc.RevokeShare(t.Context(), &pb.RevokeShareRequest{ShareId: read.Share.Id}); err != nil {
			t.Fatal(err)
		}
		ctx := peer.NewContext(t.Context(), &peer.Peer{Addr: readAddr})
		_, err := gate.UnaryInterceptor(ctx, &pb.GetVersionRequest{}, &grpc.UnaryServerInfo{FullMethod: "/betcode.v1.VersionService/GetVersion"},
			func(context.Context, any) (any, error) { return nil, nil })
		if reason(err) != CodeShareEnded {
			t.Fatalf("a call after the share was revoked: %v", err)
		}
	})
}

// fakeStream is a ServerStream that receives one message.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	msg  *pb.ResumeSessionRequest
	sent *[]string
}

func (s *fakeStream) SendMsg(m any) error {
	*s.sent = append(*s.sent, m.(*pb.SessionUpdate).GetSession().GetId())
	return nil
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) RecvMsg(m any) error {
	m.(*pb.ResumeSessionRequest).SessionId = s.msg.SessionId
	return nil
}

// TestRevokeAndExpiry: revoking a share closes its device's channels at
// once and revokes its relay credential; an expiring share closes them at
// its end (Run), and its device can no longer be authorized.
func TestRevokeAndExpiry(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = f.svc.Run(ctx)
	}()
	defer func() { cancel(); <-ran }()

	rev := f.share(t, pb.ShareMode_SHARE_MODE_ANSWER, time.Hour)
	d, _ := f.pairWith(t, rev.Code)
	c := &closer{done: make(chan struct{})}
	f.devices.Track(d.ID, c)
	resp, err := f.svc.RevokeShare(t.Context(), &pb.RevokeShareRequest{ShareId: rev.Share.Id})
	if err != nil || resp.ChannelsClosed != 1 || resp.Share.RevokedAt == nil {
		t.Fatalf("RevokeShare: %v %v", resp, err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("the revoked share's channel is open")
	}
	if len(f.relay.revoked) != 1 || f.relay.revoked[0] != "tok-"+rev.Share.Id {
		t.Fatalf("relay revocations %v", f.relay.revoked)
	}
	if _, err := f.svc.RevokeShare(t.Context(), &pb.RevokeShareRequest{ShareId: "sh-nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("revoking an unknown share: %v", err)
	}

	exp := f.share(t, pb.ShareMode_SHARE_MODE_READ, 300*time.Millisecond)
	d, _ = f.pairWith(t, exp.Code)
	c = &closer{done: make(chan struct{})}
	f.devices.Track(d.ID, c)
	select {
	case <-c.done:
		if late := time.Since(exp.Share.ExpiresAt.AsTime()); late > time.Second {
			t.Errorf("the expired share's channel closed %s after its end", late)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the expired share's channel is still open")
	}
	if _, err := f.devices.Authorize(d.PublicKey); err == nil {
		t.Fatal("an expired share's device was authorized")
	}
	list, err := f.svc.ListShares(t.Context(), &pb.ListSharesRequest{SessionId: "s-1"})
	if err != nil || len(list.Shares) != 2 || list.Shares[0].Id != exp.Share.Id || list.Shares[0].DeviceName != "teammate" {
		t.Fatalf("ListShares: %v %v", list, err)
	}
}
