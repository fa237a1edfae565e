package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

func TestParseUntil(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time // zero: nil (the machine's default)
		err  bool
	}{
		{"", time.Time{}, false},
		{"2h", now.Add(2 * time.Hour), false},
		{"90m", now.Add(90 * time.Minute), false},
		{"2026-12-24T18:00:00Z", time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC), false},
		{"0s", time.Time{}, true},
		{"-1h", time.Time{}, true},
		{"2026-12-01T00:00:00Z", time.Time{}, true},
		{"tomorrow", time.Time{}, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseUntil(tc.in, now)
			switch {
			case tc.err:
				if err == nil {
					t.Fatalf("parseUntil(%q) = %v; want an error", tc.in, got)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want.IsZero() && got != nil, !tc.want.IsZero() && !got.AsTime().Equal(tc.want):
				t.Fatalf("parseUntil(%q) = %v; want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestPrintShares(t *testing.T) {
	now := time.Now()
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	var b strings.Builder
	printShares(&b, []*pb.Share{
		{Id: "sh-1", SessionId: "s-1", User: "bob", Mode: pb.ShareMode_SHARE_MODE_ANSWER, ExpiresAt: ts(time.Hour), DeviceId: "d", DeviceName: "bob's phone"},
		{Id: "sh-2", SessionId: "s-1", User: "bob", Mode: pb.ShareMode_SHARE_MODE_READ, ExpiresAt: ts(time.Hour)},
		{Id: "sh-3", SessionId: "s-1", User: "carol", ExpiresAt: ts(time.Hour), RevokedAt: ts(-time.Minute)},
		{Id: "sh-4", SessionId: "s-2", User: "carol", ExpiresAt: ts(-time.Minute)},
	}, now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{{"SHARE"}, {"sh-1", "can-answer", "active", "bob's phone"}, {"sh-2", "read-only", "waiting for the code"},
		{"sh-3", "revoked"}, {"sh-4", "expired"}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(lines[i], p) {
				t.Errorf("line %d %q lacks %q", i, lines[i], p)
			}
		}
	}
	b.Reset()
	printShares(&b, nil, now)
	if b.String() != "no session shares\n" {
		t.Errorf("no shares: %q", b.String())
	}
}

// TestPairToken: an ordinary code's Pair call uses its ticket; a share
// code's uses the stored login of the user it is for, on its relay, and
// refuses anyone else's or none.
func TestPairToken(t *testing.T) {
	dir := cliEnv(t)
	code := e2ee.PairingCode{Relay: "relay.example:443", Ticket: "bct_ticket"}
	if tok, err := pairToken(code); err != nil || tok != "bct_ticket" {
		t.Fatalf("an ordinary code: %q %v", tok, err)
	}
	code.Ticket = e2ee.ShareTicket("bob")
	if _, err := pairToken(code); err == nil || !strings.Contains(err.Error(), "log in to relay.example:443 as bob") {
		t.Fatalf("a share code without a login: %v", err)
	}
	path := filepath.Join(dir, "betcode", "credentials.json")
	save := func(c client.Credentials) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
	}
	save(client.Credentials{Relay: "other.example:443", Token: "bct_bob", User: "bob"})
	if _, err := pairToken(code); err == nil {
		t.Fatal("a share code with a login to another relay worked")
	}
	save(client.Credentials{Relay: "relay.example:443", Token: "bct_carol", User: "carol"})
	if _, err := pairToken(code); err == nil || !strings.Contains(err.Error(), "only bob can use it") {
		t.Fatalf("a share code with another user's login: %v", err)
	}
	save(client.Credentials{Relay: "relay.example:443", Token: "bct_bob", User: "bob"})
	if tok, err := pairToken(code); err != nil || tok != "bct_bob" {
		t.Fatalf("a share code with its user's login: %q %v", tok, err)
	}
}

// fakeShares serves ShareService, recording requests.
type fakeShares struct {
	pb.UnimplementedShareServiceServer
	mu      sync.Mutex
	created []*pb.CreateShareRequest
}

func (f *fakeShares) CreateShare(_ context.Context, req *pb.CreateShareRequest) (*pb.CreateShareResponse, error) {
	f.mu.Lock()
	f.created = append(f.created, req)
	f.mu.Unlock()
	exp := req.ExpiresAt
	if exp == nil {
		exp = timestamppb.New(time.Now().Add(24 * time.Hour))
	}
	return &pb.CreateShareResponse{Share: &pb.Share{Id: "sh-1", SessionId: req.SessionId, User: req.User, Mode: req.Mode, ExpiresAt: exp},
		Code: "betcode-pair:1:CODE", CodeExpiresAt: timestamppb.New(time.Now().Add(10 * time.Minute))}, nil
}

func (f *fakeShares) RevokeShare(_ context.Context, req *pb.RevokeShareRequest) (*pb.RevokeShareResponse, error) {
	if req.ShareId != "sh-1" {
		return nil, status.Error(codes.NotFound, "no share "+req.ShareId)
	}
	return &pb.RevokeShareResponse{Share: &pb.Share{Id: "sh-1", SessionId: "s-1", User: "bob"}, ChannelsClosed: 2}, nil
}

func (f *fakeShares) ListShares(context.Context, *pb.ListSharesRequest) (*pb.ListSharesResponse, error) {
	return &pb.ListSharesResponse{Shares: []*pb.Share{{Id: "sh-1", SessionId: "s-1", User: "bob", ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}}}, nil
}

// TestSessionShareCommands runs share, shares and unshare against a
// ShareService on a Unix socket.
func TestSessionShareCommands(t *testing.T) {
	cliEnv(t)
	sockDir, err := os.MkdirTemp("", "bcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	l, err := net.Listen("unix", filepath.Join(sockDir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeShares{}
	srv := grpc.NewServer()
	pb.RegisterShareServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() { srv.Stop(); <-done })
	agent := []string{"--agent", "unix://" + l.Addr().String()}

	out, _, err := runCLI(t, "", append(agent, "session", "share", "s-1", "--with", "bob", "--answer", "--until", "2h")...)
	if err != nil || !strings.Contains(out, "betcode pair betcode-pair:1:CODE") || !strings.Contains(out, "(can answer)") ||
		!strings.Contains(out, "betcode session unshare sh-1") {
		t.Fatalf("share: %v\n%s", err, out)
	}
	req := f.created[0]
	if req.SessionId != "s-1" || req.User != "bob" || req.Mode != pb.ShareMode_SHARE_MODE_ANSWER ||
		time.Until(req.ExpiresAt.AsTime()) > 2*time.Hour || time.Until(req.ExpiresAt.AsTime()) < time.Hour {
		t.Fatalf("CreateShare request %v", req)
	}
	out, _, err = runCLI(t, "", append(agent, "session", "share", "s-1", "--with", "bob")...)
	if err != nil || f.created[1].Mode != pb.ShareMode_SHARE_MODE_READ || f.created[1].ExpiresAt != nil || !strings.Contains(out, "(read-only)") {
		t.Fatalf("share read-only, default end: %v %v\n%s", err, f.created[1], out)
	}
	if _, _, err := runCLI(t, "", append(agent, "session", "share", "s-1")...); client.ExitCode(err) != client.ExitInvalidArgs {
		t.Fatalf("share without --with: %v", err)
	}
	if _, _, err := runCLI(t, "", append(agent, "session", "share", "s-1", "--with", "bob", "--until", "yesterday")...); client.ExitCode(err) != client.ExitInvalidArgs {
		t.Fatalf("share with a bad --until: %v", err)
	}
	out, _, err = runCLI(t, "", append(agent, "session", "shares")...)
	if err != nil || !strings.Contains(out, "sh-1") || !strings.Contains(out, "waiting for the code") {
		t.Fatalf("shares: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "", append(agent, "session", "unshare", "sh-1")...)
	if err != nil || !strings.Contains(out, "2 open channel(s) closed") {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "", append(agent, "session", "unshare", "sh-9")...); err == nil || !strings.Contains(err.Error(), "no share sh-9") {
		t.Fatalf("unshare of an unknown share: %v", err)
	}
}
