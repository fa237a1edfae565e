package channelsvc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/betcode-dev/betcode/agent/channelsvc"
	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// webAgent is the few AgentService and VersionService calls the web API
// makes for these tests.
type webAgent struct {
	pb.UnimplementedAgentServiceServer
	pb.UnimplementedVersionServiceServer
}

func (webAgent) GetVersion(context.Context, *pb.GetVersionRequest) (*pb.GetVersionResponse, error) {
	return &pb.GetVersionResponse{}, nil
}

func (webAgent) ListSessions(context.Context, *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	return &pb.ListSessionsResponse{Total: 1, Sessions: []*pb.SessionSummary{{Id: "s-web", Name: "web session"}}}, nil
}

func (webAgent) WatchSessions(_ *pb.WatchSessionsRequest, s pb.AgentService_WatchSessionsServer) error {
	if err := s.Send(&pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s-web", Name: "web session"}}); err != nil {
		return err
	}
	if err := s.Send(&pb.SessionUpdate{SnapshotDone: true}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// channelOnly refuses AgentService and VersionService calls that do not
// come from a channel's device, as localtoken.Guard does with
// --relay-e2e=required for relayed calls.
func channelOnly(ctx context.Context, method string) error {
	if strings.HasPrefix(method, "/betcode.v1.ChannelService/") || strings.HasPrefix(method, "/betcode.v1.DeviceService/") {
		return nil
	}
	p, ok := peer.FromContext(ctx)
	if a, isChan := p.Addr.(e2ee.Addr); !ok || !isChan || a.Role != e2ee.RoleDevice {
		return status.Errorf(codes.PermissionDenied, "%s outside a channel (peer %v)", method, p.Addr)
	}
	return nil
}

// newWebMachine is newMachine with the agent's web API behind it and a
// push handler that names the calling device; register adds services to
// the agent's gRPC server.
func newWebMachine(t *testing.T, register ...func(*grpc.Server)) *machine {
	t.Helper()
	st, err := pairing.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRelay{}
	ln := channelsvc.NewListener()
	svc := &channelsvc.Service{Store: st, MachineID: "m-1", MachineName: "laptop", Relay: r, Listener: ln,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "1.0.0",
		PushHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, ok := channelsvc.DeviceFromContext(r.Context())
			if !ok {
				http.Error(w, "no device", http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"device": d.Name, "path": r.Method + " " + r.URL.Path})
		})}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := channelOnly(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := channelOnly(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}))
	pb.RegisterChannelServiceServer(srv, svc)
	pb.RegisterDeviceServiceServer(srv, svc)
	pb.RegisterAgentServiceServer(srv, webAgent{})
	pb.RegisterVersionServiceServer(srv, webAgent{})
	for _, r := range register {
		r(srv)
	}
	bl := bufconn.Listen(1 << 20)
	go srv.Serve(bl)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///relay", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &machine{svc: svc, relay: r, cc: cc}
}

// webClient is a browser's side of a web/1 channel, for tests.
type webClient struct {
	t *testing.T
	c *e2ee.Conn
}

func (m *machine) dialWeb(ctx context.Context, t *testing.T, dev e2ee.KeyPair, protocol string) (*webClient, error) {
	t.Helper()
	hello, _ := json.Marshal(pairing.Hello{Name: "browser", Version: "web test", Protocol: protocol})
	c, err := e2ee.Dial(ctx, m.open(ctx, t), dev, "m-1", m.svc.Store.Key().Public, hello)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return &webClient{t: t, c: c}, nil
}

func (w *webClient) send(f map[string]any) {
	w.t.Helper()
	j, _ := json.Marshal(f)
	w.sendRaw(j)
}

func (w *webClient) sendRaw(j []byte) {
	w.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(len(j)))
	if _, err := w.c.Write(append(b, j...)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *webClient) read() (map[string]any, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(w.c, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(w.c, b); err != nil {
		return nil, err
	}
	var f map[string]any
	return f, json.Unmarshal(b, &f)
}

// next reads frames until one of type t (ws frames of other types are
// skipped only when skipWS).
func (w *webClient) next(t string) map[string]any {
	w.t.Helper()
	for {
		f, err := w.read()
		if err != nil {
			w.t.Fatalf("waiting for a %s frame: %v", t, err)
		}
		if f["t"] == t {
			return f
		}
		w.t.Logf("skipped frame %v", f)
	}
}

func (w *webClient) request(id int, method, path, body string) (int, string) {
	w.t.Helper()
	f := map[string]any{"t": "req", "id": id, "method": method, "path": path}
	if body != "" {
		f["body"] = body
	}
	w.send(f)
	res := w.next("res")
	if res["id"] != float64(id) {
		w.t.Fatalf("res %v for req %d", res, id)
	}
	b, _ := res["body"].(string)
	return int(res["status"].(float64)), b
}

func TestWebChannel(t *testing.T) {
	m := newWebMachine(t)
	ctx := ctxT(t)
	dev := pairDevice(ctx, t, m, "phone")
	w, err := m.dialWeb(ctx, t, dev, pairing.ProtocolWeb)
	if err != nil {
		t.Fatal(err)
	}

	if st, body := w.request(1, "GET", "/sessions?limit=5", ""); st != 200 || !strings.Contains(body, "s-web") {
		t.Fatalf("GET /sessions: %d %s", st, body)
	}
	if st, body := w.request(2, "GET", "/machines", ""); st != 404 {
		t.Fatalf("GET /machines: %d %s", st, body)
	}
	if st, body := w.request(3, "POST", "/machines/x/switch", "{}"); st != 404 {
		t.Fatalf("POST /machines/x/switch: %d %s", st, body)
	}
	if st, body := w.request(4, "POST", "/push/subscriptions", `{"endpoint":"https://push.example/x"}`); st != 201 ||
		!strings.Contains(body, `"device":"phone"`) || !strings.Contains(body, `"path":"POST /push/subscriptions"`) {
		t.Fatalf("POST /push/subscriptions: %d %s", st, body)
	}
	if st, body := w.request(5, "GET", "/nothing-here", ""); st != 404 || !strings.Contains(body, "NOT_FOUND") {
		t.Fatalf("GET /nothing-here: %d %s", st, body)
	}

	// The event socket: its snapshot, a ping's pong, then closed.
	w.send(map[string]any{"t": "ws.open"})
	snap := w.next("ws")
	if !strings.Contains(snap["data"].(string), `"snapshot"`) || !strings.Contains(snap["data"].(string), "s-web") {
		t.Fatalf("first event message %v", snap)
	}
	w.send(map[string]any{"t": "ws", "data": `{"type":"ping","id":"p1"}`})
	for {
		f := w.next("ws")
		if strings.Contains(f["data"].(string), `"pong"`) {
			break
		}
	}
	w.send(map[string]any{"t": "ws.close"})
	if f := w.next("ws.close"); f["code"] != float64(1000) {
		t.Fatalf("ws.close %v", f)
	}
	// A second event socket on the same channel.
	w.send(map[string]any{"t": "ws.open"})
	if f := w.next("ws"); !strings.Contains(f["data"].(string), `"snapshot"`) {
		t.Fatalf("second socket's first message %v", f)
	}

	// Revoking the device ends the channel.
	if _, err := pb.NewDeviceServiceClient(m.cc).RevokeDevice(ctx, &pb.RevokeDeviceRequest{DeviceId: m.svc.Store.List()[0].ID}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := w.read(); err != nil {
			break
		}
	}
}

func TestWebChannelMalformed(t *testing.T) {
	m := newWebMachine(t)
	ctx := ctxT(t)
	dev := pairDevice(ctx, t, m, "phone")
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"not JSON", []byte("nope")},
		{"no type", []byte(`{"id":1}`)},
		{"req without id", []byte(`{"t":"req","method":"GET","path":"/sessions"}`)},
		{"ws without data", []byte(`{"t":"ws"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := m.dialWeb(ctx, t, dev, pairing.ProtocolWeb)
			if err != nil {
				t.Fatal(err)
			}
			w.sendRaw(tc.frame)
			if f, err := w.read(); err == nil {
				t.Fatalf("the channel goes on after a malformed frame: %v", f)
			}
		})
	}
	t.Run("over 4 MiB", func(t *testing.T) {
		w, err := m.dialWeb(ctx, t, dev, pairing.ProtocolWeb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.c.Write(binary.BigEndian.AppendUint32(nil, channelsvc.MaxWebFrame+1)); err != nil {
			t.Fatal(err)
		}
		if f, err := w.read(); err == nil {
			t.Fatalf("the channel goes on after an oversized frame: %v", f)
		}
	})
	t.Run("unknown protocol refused", func(t *testing.T) {
		_, err := m.dialWeb(ctx, t, dev, "web/9")
		var refused *e2ee.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, `"web/9"`) {
			t.Fatalf("a channel of protocol web/9: %v", err)
		}
	})
}

// TestWebChannelRequestsWait: more requests than MaxWebRequests at once all
// get their answers.
func TestWebChannelManyRequests(t *testing.T) {
	m := newWebMachine(t)
	ctx := ctxT(t)
	dev := pairDevice(ctx, t, m, "phone")
	w, err := m.dialWeb(ctx, t, dev, pairing.ProtocolWeb)
	if err != nil {
		t.Fatal(err)
	}
	n := channelsvc.MaxWebRequests * 2
	var buf bytes.Buffer
	for i := range n {
		j, _ := json.Marshal(map[string]any{"t": "req", "id": i + 1, "method": "GET", "path": "/sessions"})
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(j))))
		buf.Write(j)
	}
	if _, err := w.c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	seen := map[float64]bool{}
	for len(seen) < n {
		f := w.next("res")
		if f["status"] != float64(200) {
			t.Fatalf("res %v", f)
		}
		seen[f["id"].(float64)] = true
	}
}
