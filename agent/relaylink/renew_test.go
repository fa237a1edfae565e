package relaylink

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	"github.com/betcode-dev/betcode/agent/internal/testpki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

func TestDueForRenewal(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(90 * 24 * time.Hour)}
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"fresh", start.Add(time.Hour), false},
		{"half way", start.Add(45 * 24 * time.Hour), false},
		{"just over a third left", start.Add(60*24*time.Hour - time.Minute), false},
		{"just under a third left", start.Add(60*24*time.Hour + time.Minute), true},
		{"an hour left", start.Add(90*24*time.Hour - time.Hour), true},
		{"expired", start.Add(91 * 24 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dueForRenewal(leaf, tt.now); got != tt.want {
				t.Fatalf("dueForRenewal at %v = %v, want %v", tt.now, got, tt.want)
			}
		})
	}
}

// writePair writes a machine certificate and key into dir.
func writePair(t *testing.T, dir string, certPEM, keyPEM []byte) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "machine.crt"), filepath.Join(dir, "machine.key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

func TestCertFileReload(t *testing.T) {
	ca := testpki.NewCA(t)
	now := time.Now()
	certA, key := ca.Machine(t, "m1", now.Add(-time.Hour), now.Add(time.Hour))
	certPath, keyPath := writePair(t, t.TempDir(), certA, key)
	cf := &certFile{certPath: certPath, keyPath: keyPath}

	a, err := cf.get()
	if err != nil {
		t.Fatal(err)
	}
	if a.Leaf.SerialNumber.String() != serialOf(t, certA) {
		t.Fatal("get returned another certificate")
	}
	if again, _ := cf.get(); again != a {
		t.Fatal("an unchanged file was loaded again")
	}

	// Another certificate for the same key, written the way renewal does,
	// with a different modification time: the next handshake gets it.
	keyBlock, _ := pem.Decode(key)
	priv, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		t.Fatal(err)
	}
	certB, err := ca.SignCSR(csr, "m1", now.Add(-time.Minute), now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(certPath, certB, 0o644); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute)
	if err := os.Chtimes(certPath, later, later); err != nil {
		t.Fatal(err)
	}
	b, err := cf.getClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Leaf.SerialNumber.String() != serialOf(t, certB) {
		t.Fatal("the replaced certificate was not reloaded")
	}
}

// fakeRelay serves TunnelService and EnrollService over mTLS on loopback.
// Tunnels stay open (after the heartbeat that confirms them) until kicked.
type fakeRelay struct {
	pb.UnimplementedTunnelServiceServer
	pb.UnimplementedEnrollServiceServer
	ca     *testpki.CA
	refuse error // RenewCertificate's answer, when set

	addr       string
	caFile     string
	registered chan string // serial of the client certificate, per Register
	tunnels    chan string // client address, per OpenTunnel
	renewals   chan string // client address, per RenewCertificate
	kick       chan struct{}
	// drain sends the open tunnel the drain signal (RELAY_DRAINING), as a
	// draining replica does; the tunnel stays until kick.
	drain chan struct{}
	// handover says, per OpenTunnel, whether the agent offered to hand
	// over (tunnel.HandoverHeader).
	handover chan bool
	// live counts the OpenTunnel streams open now.
	live atomic.Int32
}

func startRelay(t *testing.T, ca *testpki.CA) *fakeRelay {
	t.Helper()
	r := &fakeRelay{
		ca: ca, caFile: ca.WriteCA(t, t.TempDir()),
		registered: make(chan string, 100), tunnels: make(chan string, 100), renewals: make(chan string, 100),
		kick: make(chan struct{}), drain: make(chan struct{}), handover: make(chan bool, 100),
	}
	r.addr = ca.Serve(t, func(srv *grpc.Server) {
		pb.RegisterTunnelServiceServer(srv, r)
		pb.RegisterEnrollServiceServer(srv, r)
	})
	return r
}

func clientCert(ctx context.Context) (*x509.Certificate, string) {
	p, _ := peer.FromContext(ctx)
	ti, _ := p.AuthInfo.(credentials.TLSInfo)
	if len(ti.State.PeerCertificates) == 0 {
		return nil, p.Addr.String()
	}
	return ti.State.PeerCertificates[0], p.Addr.String()
}

func (r *fakeRelay) Register(ctx context.Context, _ *pb.RegisterRequest) (*pb.RegisterResponse, error) {
	cert, _ := clientCert(ctx)
	if cert == nil {
		return nil, status.Error(codes.Unauthenticated, "no client certificate")
	}
	r.registered <- cert.SerialNumber.String()
	return &pb.RegisterResponse{Accepted: true, HeartbeatIntervalSecs: 3600}, nil
}

func (r *fakeRelay) OpenTunnel(stream grpc.BidiStreamingServer[pb.TunnelFrame, pb.TunnelFrame]) error {
	_, addr := clientCert(stream.Context())
	// Counted before the heartbeat that confirms the tunnel: the agent
	// logs "relay link up" on it, and a test that counts then must see
	// this tunnel.
	r.live.Add(1)
	defer r.live.Add(-1)
	if err := stream.Send(&pb.TunnelFrame{Payload: &pb.TunnelFrame_Heartbeat{Heartbeat: &pb.TunnelHeartbeat{}}}); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	r.handover <- slices.Contains(md.Get(tunnel.HandoverHeader), "1")
	r.tunnels <- addr
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-r.kick:
			return nil
		case <-r.drain:
			if err := stream.Send(&pb.TunnelFrame{Payload: &pb.TunnelFrame_Error{Error: &pb.ErrorFrame{
				Code: CodeRelayDraining, Message: "relay replica draining: reconnect now"}}}); err != nil {
				return err
			}
		}
	}
}

func (r *fakeRelay) RenewCertificate(ctx context.Context, req *pb.RenewCertificateRequest) (*pb.RenewCertificateResponse, error) {
	_, addr := clientCert(ctx)
	r.renewals <- addr
	if r.refuse != nil {
		return nil, r.refuse
	}
	id, err := mtls.MachineIDFromPeer(ctx)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	notAfter := time.Now().Add(90 * 24 * time.Hour)
	cert, err := r.ca.SignCSR(req.CsrDer, id, time.Now().Add(-time.Minute), notAfter)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.RenewCertificateResponse{CertificatePem: cert, NotAfter: timestamppb.New(notAfter)}, nil
}

// logs records log lines (and passes them to the test's output) and
// announces each message on a channel.
type logs struct {
	mu    sync.Mutex
	lines []string // "LEVEL message"
	msgs  chan string
}

type logHandler struct {
	slog.Handler
	l *logs
}

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	h.l.mu.Lock()
	h.l.lines = append(h.l.lines, r.Level.String()+" "+r.Message)
	h.l.mu.Unlock()
	select {
	case h.l.msgs <- r.Message:
	default:
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return logHandler{Handler: h.Handler.WithAttrs(a), l: h.l}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{Handler: h.Handler.WithGroup(name), l: h.l}
}

func (l *logs) count(line string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if s == line {
			n++
		}
	}
	return n
}

func testLogger(t *testing.T) (*slog.Logger, *logs) {
	l := &logs{msgs: make(chan string, 1000)}
	h := slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(logHandler{Handler: h, l: l}), l
}

// runLink starts a link, reconnecting every 10 ms, and stops it when the
// test ends.
func runLink(t *testing.T, cfg Config) *Link {
	t.Helper()
	return runLinkSteps(t, cfg, []time.Duration{10 * time.Millisecond})
}

// runLinkSteps is runLink with the reconnection schedule steps.
func runLinkSteps(t *testing.T, cfg Config, steps []time.Duration) *Link {
	t.Helper()
	saved := Steps
	Steps = steps
	link, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = link.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		Steps = saved
	})
	return link
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30s", what)
		panic("unreachable")
	}
}

func waitLog(t *testing.T, l *logs, msg string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-l.msgs:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("no log %q within 30s", msg)
		}
	}
}

// TestRenewal: with the (injected) clock past two thirds of the
// certificate's life, the link renews it over the tunnel's own connection,
// keeps the tunnel, writes the file in place, and presents the new
// certificate at the next connection.
func TestRenewal(t *testing.T) {
	ca := testpki.NewCA(t)
	relay := startRelay(t, ca)
	now := time.Now()
	certPEM, keyPEM := ca.Machine(t, "m1", now.Add(-time.Hour), now.Add(2*time.Hour))
	dir := t.TempDir()
	certPath, keyPath := writePair(t, dir, certPEM, keyPEM)
	log, logs := testLogger(t)

	link := runLink(t, Config{
		Relay: relay.addr, CAFile: relay.caFile, CertFile: certPath, KeyFile: keyPath, Logger: log,
		// By the real clock two of three hours are left: not due. By the
		// injected one, 59 minutes.
		Now: func() time.Time { return now.Add(61 * time.Minute) },
	})

	if got := recv(t, relay.registered, "Register"); got != serialOf(t, certPEM) {
		t.Fatalf("registered with serial %s, want the original certificate's", got)
	}
	tunnelAddr := recv(t, relay.tunnels, "tunnel")
	if renewAddr := recv(t, relay.renewals, "RenewCertificate"); renewAddr != tunnelAddr {
		t.Fatalf("renewed from %s, the tunnel is on %s: want the same connection", renewAddr, tunnelAddr)
	}
	waitLog(t, logs, "relay link: certificate renewed")

	newPEM, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	if serialOf(t, newPEM) == serialOf(t, certPEM) {
		t.Fatal("the certificate file was not replaced")
	}
	if _, err := tls.X509KeyPair(newPEM, keyPEM); err != nil {
		t.Fatalf("the new certificate does not go with the key: %v", err)
	}
	if fi, _ := os.Stat(certPath); fi.Mode().Perm() != 0o644 {
		t.Fatalf("certificate mode %04o, want the old file's 0644", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("files in the certificate dir: %v, want the certificate and the key", entries)
	}
	if up, _ := link.Connected(); !up {
		t.Fatal("the tunnel went down during renewal")
	}
	select {
	case s := <-relay.registered:
		t.Fatalf("the link registered again (serial %s): the tunnel was dropped", s)
	default:
	}

	// The next connection presents the renewed certificate.
	relay.kick <- struct{}{}
	if got := recv(t, relay.registered, "second Register"); got != serialOf(t, newPEM) {
		t.Fatalf("reconnected with serial %s, want the renewed certificate's", got)
	}
}

// TestRenewalFailure: a relay that cannot renew is told so at warn once,
// asked again at every check, and the tunnel stays up.
func TestRenewalFailure(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"no CA key", status.Error(codes.FailedPrecondition, "this relay has no CA key")},
		{"old relay", status.Error(codes.Unimplemented, "unknown service betcode.v1.EnrollService")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := testpki.NewCA(t)
			relay := startRelay(t, ca)
			relay.refuse = tt.err
			now := time.Now()
			certPEM, keyPEM := ca.Machine(t, "m1", now.Add(-2*time.Hour), now.Add(30*time.Minute))
			certPath, keyPath := writePair(t, t.TempDir(), certPEM, keyPEM)
			log, logs := testLogger(t)
			link := runLink(t, Config{
				Relay: relay.addr, CAFile: relay.caFile, CertFile: certPath, KeyFile: keyPath, Logger: log,
				RenewEvery: 10 * time.Millisecond,
			})
			recv(t, relay.registered, "Register")
			for i := range 3 {
				recv(t, relay.renewals, fmt.Sprintf("RenewCertificate %d", i+1))
			}
			const failed = "relay link: certificate renewal failed; retrying at the next check"
			if n := logs.count("WARN " + failed); n != 1 {
				t.Fatalf("%d warnings about the failure, want 1", n)
			}
			if up, _ := link.Connected(); !up {
				t.Fatal("a failed renewal took the tunnel down")
			}
			if b, _ := os.ReadFile(certPath); string(b) != string(certPEM) {
				t.Fatal("a failed renewal changed the certificate file")
			}
			select {
			case <-relay.registered:
				t.Fatal("the link reconnected after a failed renewal")
			default:
			}
		})
	}
}
