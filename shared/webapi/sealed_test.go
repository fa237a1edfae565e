package webapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeDeliver is a ChannelService whose Deliver buffers for machine
// m-off and refuses a replayed envelope ("again").
type fakeDeliver struct {
	pb.UnimplementedChannelServiceServer
	got []metadata.MD
	req []*pb.DeliverRequest
}

func (f *fakeDeliver) Deliver(ctx context.Context, r *pb.DeliverRequest) (*pb.DeliverResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.got, f.req = append(f.got, md), append(f.req, r)
	if string(r.Sealed) == "again" {
		return nil, betcodeErr(codes.AlreadyExists, "SEALED_REPLAYED", "this sealed envelope was taken before", nil)
	}
	if v := md.Get("x-betcode-machine-id"); len(v) == 1 && v[0] == "m-off" {
		return &pb.DeliverResponse{Buffered: true}, nil
	}
	return &pb.DeliverResponse{Accepted: true}, nil
}

func TestPostSealed(t *testing.T) {
	fake := &fakeDeliver{}
	gs := grpc.NewServer()
	pb.RegisterChannelServiceServer(gs, fake)
	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///fake",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, err := New(Options{Conn: conn, Role: RoleRelay})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(token string, body any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/sealed", bytes.NewReader(b))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		name   string
		token  string
		body   map[string]any
		status int
		want   map[string]any
	}{
		{"buffered", "bct_dev", map[string]any{"machine": "m-off", "sealed": []byte("envelope"), "idempotency_key": "k1"}, 200,
			map[string]any{"accepted": false, "buffered": true}},
		{"delivered", "bct_dev", map[string]any{"machine": "m-on", "sealed": []byte("envelope"), "idempotency_key": "k2"}, 200,
			map[string]any{"accepted": true, "buffered": false}},
		{"replayed", "bct_dev", map[string]any{"machine": "m-on", "sealed": []byte("again"), "idempotency_key": "k3"}, 409,
			map[string]any{"code": "SEALED_REPLAYED", "error": "this sealed envelope was taken before"}},
		{"no token", "", map[string]any{"machine": "m-on", "sealed": []byte("x"), "idempotency_key": "k"}, 401, nil},
		{"no envelope", "bct_dev", map[string]any{"machine": "m-on", "idempotency_key": "k"}, 400, nil},
		{"no key", "bct_dev", map[string]any{"machine": "m-on", "sealed": []byte("x")}, 400, nil},
		{"no machine", "bct_dev", map[string]any{"sealed": []byte("x"), "idempotency_key": "k"}, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out := post(tc.token, tc.body)
			if st != tc.status {
				t.Fatalf("status %d %v; want %d", st, out, tc.status)
			}
			for k, v := range tc.want {
				if out[k] != v {
					t.Fatalf("answer %v; want %v", out, tc.want)
				}
			}
		})
	}
	if len(fake.req) != 3 || string(fake.req[0].Sealed) != "envelope" || fake.req[0].IdempotencyKey != "k1" {
		t.Fatalf("Deliver got %v", fake.req)
	}
	md := fake.got[0]
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer bct_dev" {
		t.Fatalf("authorization %v", v)
	}
	if v := md.Get("x-betcode-machine-id"); len(v) != 1 || v[0] != "m-off" {
		t.Fatalf("machine %v", v)
	}
}
