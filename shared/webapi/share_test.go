package webapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeShareService records CreateShare requests.
type fakeShareService struct {
	pb.UnimplementedShareServiceServer
	got *pb.CreateShareRequest
}

func (f *fakeShareService) CreateShare(_ context.Context, req *pb.CreateShareRequest) (*pb.CreateShareResponse, error) {
	f.got = req
	return &pb.CreateShareResponse{Share: &pb.Share{Id: "sh-1", SessionId: req.SessionId, User: req.User, Mode: req.Mode, ExpiresAt: req.ExpiresAt},
		Code: "betcode-pair:1:CODE", CodeExpiresAt: timestamppb.New(time.Unix(1_800_000_000, 0))}, nil
}

func (f *fakeShareService) ListShares(_ context.Context, req *pb.ListSharesRequest) (*pb.ListSharesResponse, error) {
	return &pb.ListSharesResponse{Shares: []*pb.Share{{Id: "sh-1", SessionId: req.SessionId, User: "bob", Mode: pb.ShareMode_SHARE_MODE_ANSWER}}}, nil
}

func (f *fakeShareService) RevokeShare(_ context.Context, req *pb.RevokeShareRequest) (*pb.RevokeShareResponse, error) {
	if req.ShareId != "sh-1" {
		return nil, status.Error(codes.NotFound, "no share "+req.ShareId)
	}
	return &pb.RevokeShareResponse{Share: &pb.Share{Id: "sh-1", User: "bob"}, ChannelsClosed: 1}, nil
}

// TestShareRoutes: the agent serves the share routes from ShareService;
// the relay refuses them (a share code holds a pairing secret).
func TestShareRoutes(t *testing.T) {
	f := &fakeShareService{}
	gs := grpc.NewServer()
	pb.RegisterShareServiceServer(gs, f)
	lis := bufconn.Listen(1 << 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() { gs.Stop(); <-done })
	conn, err := grpc.NewClient("passthrough:///fake", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	handler := func(role string) http.Handler {
		h, err := New(Options{Conn: conn, Role: role, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	call := func(h http.Handler, method, path, body string) (int, map[string]any, []any) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var obj map[string]any
		var arr []any
		if json.Unmarshal(w.Body.Bytes(), &obj) != nil {
			_ = json.Unmarshal(w.Body.Bytes(), &arr)
		}
		return w.Code, obj, arr
	}
	agent, relay := handler(RoleAgent), handler(RoleRelay)

	code, obj, _ := call(agent, http.MethodPost, "/api/sessions/s-1/shares", `{"user":"bob","mode":"answer","expiresInSeconds":7200}`)
	if code != http.StatusOK || obj["code"] != "betcode-pair:1:CODE" || obj["share"].(map[string]any)["mode"] != "answer" {
		t.Fatalf("create: %d %v", code, obj)
	}
	if f.got.SessionId != "s-1" || f.got.User != "bob" || f.got.Mode != pb.ShareMode_SHARE_MODE_ANSWER || !f.got.ExpiresAt.AsTime().Equal(now.Add(2*time.Hour)) {
		t.Fatalf("CreateShare request %v", f.got)
	}
	if code, obj, _ := call(agent, http.MethodPost, "/api/sessions/s-1/shares", `{"user":"bob","mode":"write"}`); code != http.StatusBadRequest || obj["code"] != "INVALID_ARGUMENT" {
		t.Fatalf("create with a bad mode: %d %v", code, obj)
	}
	if code, _, arr := call(agent, http.MethodGet, "/api/sessions/s-1/shares", ""); code != http.StatusOK || len(arr) != 1 || arr[0].(map[string]any)["user"] != "bob" {
		t.Fatalf("list: %d %v", code, arr)
	}
	if code, obj, _ := call(agent, http.MethodDelete, "/api/shares/sh-1", ""); code != http.StatusOK || obj["channelsClosed"] != float64(1) {
		t.Fatalf("revoke: %d %v", code, obj)
	}
	if code, _, _ := call(agent, http.MethodDelete, "/api/shares/sh-9", ""); code != http.StatusNotFound {
		t.Fatalf("revoke an unknown share: %d", code)
	}
	for _, r := range [][2]string{{http.MethodGet, "/api/sessions/s-1/shares"}, {http.MethodPost, "/api/sessions/s-1/shares"}, {http.MethodDelete, "/api/shares/sh-1"}} {
		if code, obj, _ := call(relay, r[0], r[1], `{"user":"bob"}`); code != http.StatusForbidden || obj["code"] != "E2E_REQUIRED" {
			t.Errorf("%s %s on the relay: %d %v, want 403 E2E_REQUIRED", r[0], r[1], code, obj)
		}
	}
}
