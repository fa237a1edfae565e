package channelsvc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/betcode-dev/betcode/agent/channelsvc"
	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/pairing"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// fakeRelay issues tokens as the relay's TunnelService would.
type fakeRelay struct {
	mu      sync.Mutex
	issued  []string
	revoked []string
}

func (r *fakeRelay) Addr() string { return "relay.test:443" }
func (r *fakeRelay) IssuePairingTicket(context.Context) (string, time.Time, error) {
	return "bct_ticket", time.Now().Add(10 * time.Minute), nil
}
func (r *fakeRelay) IssueDeviceToken(_ context.Context, name string) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issued = append(r.issued, name)
	return "bct_device", "tok-1", nil
}
func (r *fakeRelay) RevokeDeviceToken(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revoked = append(r.revoked, id)
	return nil
}

// machine is an agent's gRPC server with the door: the "relay" reaches it
// on a bufconn, channels are served by the same server.
type machine struct {
	svc   *channelsvc.Service
	relay *fakeRelay
	cc    *grpc.ClientConn // as the relay: ChannelService only
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	st, err := pairing.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRelay{}
	ln := channelsvc.NewListener()
	svc := &channelsvc.Service{Store: st, MachineID: "m-1", MachineName: "laptop", Relay: r, Listener: ln,
		Log: slog.New(slog.DiscardHandler)}
	srv := grpc.NewServer()
	pb.RegisterChannelServiceServer(srv, svc)
	pb.RegisterDeviceServiceServer(srv, svc)
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

// transport carries Noise messages on a client stream.
type transport struct {
	send func([]byte) error
	recv func() ([]byte, error)
	cs   grpc.ClientStream
}

func (t transport) Send(b []byte) error   { return t.send(b) }
func (t transport) Recv() ([]byte, error) { return t.recv() }
func (t transport) Close() error          { return t.cs.CloseSend() }

func (m *machine) open(ctx context.Context, t *testing.T) transport {
	t.Helper()
	s, err := pb.NewChannelServiceClient(m.cc).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return transport{cs: s, send: func(b []byte) error { return s.Send(&pb.OpenRequest{Data: b}) },
		recv: func() ([]byte, error) { r, err := s.Recv(); return r.GetData(), err }}
}

func (m *machine) pair(ctx context.Context, t *testing.T) transport {
	t.Helper()
	s, err := pb.NewChannelServiceClient(m.cc).Pair(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return transport{cs: s, send: func(b []byte) error { return s.Send(&pb.PairRequest{Data: b}) },
		recv: func() ([]byte, error) { r, err := s.Recv(); return r.GetData(), err }}
}

// startPairing runs DeviceService.StartPairing and returns its code and a
// channel of its outcome.
func (m *machine) startPairing(ctx context.Context, t *testing.T) (e2ee.PairingCode, <-chan error) {
	t.Helper()
	s, err := pb.NewDeviceServiceClient(m.cc).StartPairing(ctx, &pb.StartPairingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	code, err := e2ee.ParsePairingCode(first.GetCode().GetText())
	if err != nil {
		t.Fatal(err)
	}
	if code.Relay != "relay.test:443" || code.MachineID != "m-1" || code.Ticket != "bct_ticket" ||
		first.GetCode().MachineFingerprint != m.svc.Store.Fingerprint() {
		t.Fatalf("code %+v", code)
	}
	done := make(chan error, 1)
	go func() {
		r, err := s.Recv()
		if err == nil && r.GetPaired() == nil {
			err = errors.New("no device in the last message")
		}
		done <- err
	}()
	return code, done
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pairDevice pairs a new device key and returns it.
func pairDevice(ctx context.Context, t *testing.T, m *machine, name string) e2ee.KeyPair {
	t.Helper()
	code, done := m.startPairing(ctx, t)
	dev, _ := e2ee.GenerateKey()
	c, err := e2ee.PairDevice(ctx, m.pair(ctx, t), dev, code, []byte(`{"name":"`+name+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.ReadMessage()
	if err != nil || !strings.Contains(string(w), `"token":"bct_device"`) || !strings.Contains(string(w), `"machine_id":"m-1"`) {
		t.Fatalf("welcome %s, %v", w, err)
	}
	c.WriteMessage([]byte(pairing.Stored))
	if err := <-done; err != nil {
		t.Fatalf("StartPairing's outcome: %v", err)
	}
	return dev
}

func TestPairThenChannel(t *testing.T) {
	m := newMachine(t)
	ctx := ctxT(t)
	dev := pairDevice(ctx, t, m, "phone")
	if got := m.svc.Store.List(); len(got) != 1 || got[0].Name != "phone" || got[0].RelayTokenID != "tok-1" {
		t.Fatalf("devices after pairing: %+v", got)
	}
	// A channel of the paired device runs the agent's API inside.
	inner, err := grpc.NewClient("passthrough:///m-1", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return e2ee.Dial(ctx, m.open(context.Background(), t), dev, "m-1", m.svc.Store.Key().Public, []byte(`{"name":"phone"}`))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	resp, err := pb.NewDeviceServiceClient(inner).ListDevices(ctx, &pb.ListDevicesRequest{})
	if err != nil || len(resp.Devices) != 1 || resp.Devices[0].LastSeen == nil {
		t.Fatalf("ListDevices inside the channel: %v %v", resp, err)
	}
	// Revoking ends the open channel at once and refuses the next.
	rev, err := pb.NewDeviceServiceClient(m.cc).RevokeDevice(ctx, &pb.RevokeDeviceRequest{DeviceId: resp.Devices[0].Id})
	if err != nil || rev.ChannelsClosed != 1 {
		t.Fatalf("revoke: %v %v", rev, err)
	}
	if m.relay.revoked[0] != "tok-1" {
		t.Errorf("the relay token was not revoked: %v", m.relay.revoked)
	}
	_, err = e2ee.Dial(ctx, m.open(ctx, t), dev, "m-1", m.svc.Store.Key().Public, nil)
	var refused *e2ee.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "revoked") {
		t.Fatalf("a revoked device's channel: %v", err)
	}
}

func TestPairingRefusals(t *testing.T) {
	m := newMachine(t)
	ctx := ctxT(t)
	t.Run("wrong secret", func(t *testing.T) {
		code, done := m.startPairing(ctx, t)
		code.Secret = make([]byte, len(code.Secret))
		dev, _ := e2ee.GenerateKey()
		_, err := e2ee.PairDevice(ctx, m.pair(ctx, t), dev, code, nil)
		if !errors.Is(err, e2ee.ErrPairingFailed) {
			t.Fatalf("pairing with a wrong secret: %v", err)
		}
		if err := <-done; status.Code(err) != codes.Aborted {
			t.Fatalf("the machine's side of a failed pairing: %v", err)
		}
	})
	t.Run("a code is spent by a failed try", func(t *testing.T) {
		code, done := m.startPairing(ctx, t)
		good := code.Secret
		code.Secret = make([]byte, len(good))
		dev, _ := e2ee.GenerateKey()
		e2ee.PairDevice(ctx, m.pair(ctx, t), dev, code, nil)
		<-done
		code.Secret = good
		if _, err := e2ee.PairDevice(ctx, m.pair(ctx, t), dev, code, nil); err == nil {
			t.Fatal("a spent code paired")
		}
	})
	t.Run("unpaired key", func(t *testing.T) {
		dev, _ := e2ee.GenerateKey()
		_, err := e2ee.Dial(ctx, m.open(ctx, t), dev, "m-1", m.svc.Store.Key().Public, nil)
		var refused *e2ee.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not paired") {
			t.Fatalf("an unpaired device's channel: %v", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		tr := m.open(ctx, t)
		tr.Send([]byte("not a noise message"))
		_, err := tr.Recv()
		if err == nil || err == io.EOF {
			t.Fatalf("garbage handshake: %v", err)
		}
	})
	if len(m.svc.Store.List()) != 0 {
		t.Fatalf("refused pairings left devices: %+v", m.svc.Store.List())
	}
}

func TestClientPairsAndStores(t *testing.T) {
	// client.Pairings: the current machine, lookup by name.
	ps := &client.Pairings{}
	ps.Put(client.Pairing{MachineID: "m-1", MachineName: "laptop"})
	ps.Put(client.Pairing{MachineID: "m-2", MachineName: "desk"})
	for _, tc := range []struct{ q, want string }{{"", "m-2"}, {"m-1", "m-1"}, {"LAPTOP", "m-1"}, {"desk", "m-2"}} {
		if p, ok := ps.Find(tc.q); !ok || p.MachineID != tc.want {
			t.Errorf("Find(%q) = %v %v, want %s", tc.q, p.MachineID, ok, tc.want)
		}
	}
	if _, ok := ps.Find("nope"); ok {
		t.Error("Find of an unknown machine succeeded")
	}
}
