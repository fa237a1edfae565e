package bench

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// certMint signs machine certificates in memory with the relay's CA:
// issuing thousands through pki.IssueMachine (files, fsync) is slow, and
// every simulated agent needs its own machine id.
type certMint struct {
	ca    *x509.Certificate
	key   crypto.Signer
	roots *x509.CertPool
}

func newCertMint(tb testing.TB, pkiDir string) *certMint {
	tb.Helper()
	certPEM, err := os.ReadFile(filepath.Join(pkiDir, pki.CACertFile))
	if err != nil {
		tb.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(pkiDir, pki.CAKeyFile))
	if err != nil {
		tb.Fatal(err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		tb.Fatal("CA files are not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &certMint{ca: ca, key: k.(crypto.Signer), roots: roots}
}

// machine returns a client TLS config with a fresh certificate for id,
// shaped like pki.IssueMachine's (URI SAN betcode://machine/<id>), owned by
// benchUser.
func (m *certMint) machine(id string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"BetCode"}, OrganizationalUnit: []string{"machine"}, CommonName: id},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{mtls.MachineURI(id), mtls.OwnerURI(mtls.Owner{Kind: mtls.OwnerUser, Name: benchUser})},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, m.ca, key.Public(), m.key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2"},
		ServerName:   "127.0.0.1",
		RootCAs:      m.roots,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
	}, nil
}

// machines mints n machine configs named sim-00000… in parallel.
func (m *certMint) machines(tb testing.TB, prefix string, n int) []*tls.Config {
	tb.Helper()
	out := make([]*tls.Config, n)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				c, err := m.machine(fmt.Sprintf("%s-%05d", prefix, i))
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				out[i] = c
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	return out
}

// agentLink is a minimal agent, as agent/relaylink does it (the relay module
// must not import agent packages): Register, OpenTunnel, tunnel.Server on
// the tunnel, and a direct connection when the relay offers one
// (tunnel.ServeDirect). The gRPC options copy relaylink's.
// BETCODE_BENCH_TUNNEL=stream leaves out CapabilityDirect, so that calls stay
// on the OpenTunnel stream; =frames leaves out CapabilityHTTP2 too, so that
// the relay uses yamux and the one-stream-per-call TunnelFrame protocol.
type agentLink struct {
	cc      *grpc.ClientConn
	stop    context.CancelFunc
	done    chan struct{}  // closed when the tunnel is gone
	directs sync.WaitGroup // direct connections (tunnel.ServeDirect)
}

func dialAgent(ctx context.Context, relayAddr string, tlsCfg *tls.Config, srv *grpc.Server) (*agentLink, error) {
	cc, err := grpc.NewClient(relayAddr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20),
	)
	if err != nil {
		return nil, err
	}
	caps := []string{"claude-code", tunnel.CapabilityHTTP2, tunnel.CapabilityDirect}
	switch os.Getenv("BETCODE_BENCH_TUNNEL") {
	case "frames":
		caps = caps[:1]
	case "stream":
		caps = caps[:2]
	}
	api := pb.NewTunnelServiceClient(cc)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := api.Register(rctx, &pb.RegisterRequest{MachineName: "bench", Capabilities: caps,
		Info: &pb.MachineInfo{Os: "linux", Arch: "amd64", Version: "bench"}})
	cancel()
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("register: %w", err)
	}
	if !resp.Accepted {
		cc.Close()
		return nil, errors.New("registration refused: " + resp.Message)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := api.OpenTunnel(sctx)
	if err != nil {
		stop()
		cc.Close()
		return nil, fmt.Errorf("open tunnel: %w", err)
	}
	conn := tunnel.NewConn(stream, stop, tunnel.Addr("machine"), tunnel.Addr("relay"))
	confirmed := make(chan struct{})
	var once sync.Once
	conn.OnHeartbeat = func(*pb.TunnelHeartbeat) { once.Do(func() { close(confirmed) }) }
	ts := &tunnel.Server{Remote: "relay"}
	if srv != nil {
		ts.Handler, ts.Native = srv, srv
	}
	l := &agentLink{cc: cc, stop: stop, done: make(chan struct{})}
	dial := tunnel.DirectDialer(tlsCfg, relayAddr)
	conn.OnDirectOffer = func(token []byte) {
		l.directs.Go(func() { _ = ts.ServeDirect(sctx, dial, token, 4) })
	}
	go func() {
		defer close(l.done)
		defer l.directs.Wait()
		defer stop()
		_ = ts.ServeConn(sctx, conn)
	}()
	// The relay's heartbeat frame says it can route calls to us.
	confirm := time.NewTimer(15 * time.Second)
	defer confirm.Stop()
	select {
	case <-confirmed:
		return l, nil
	case <-l.done:
		cc.Close()
		return nil, errors.New("tunnel closed before the relay confirmed it")
	case <-confirm.C:
		l.close()
		return nil, errors.New("the relay did not confirm the tunnel within 15s")
	}
}

func (l *agentLink) close() {
	l.stop()
	<-l.done
	l.cc.Close()
}
