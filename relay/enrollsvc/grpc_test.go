package enrollsvc_test

import (
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// serve runs e's service on a gRPC server on loopback, over TLS with the
// relay certificate of e's PKI and client certificates verified if given
// (the relay's mode), and returns its address.
func serve(t *testing.T, e *env) string {
	t.Helper()
	cfg, err := mtls.ServerConfig(filepath.Join(e.dir, pki.RelayCertFile), filepath.Join(e.dir, pki.RelayKeyFile),
		filepath.Join(e.dir, pki.CACertFile), mtls.VerifyClientCertIfGiven)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(mtls.ServerCredentials(cfg, slog.New(slog.NewTextHandler(e.logs, nil)))))
	pb.RegisterEnrollServiceServer(srv, e.svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// mtlsClientConfig trusts caFile and presents no certificate; the server
// name comes from the dialled 127.0.0.1, an IP SAN of the relay.
func mtlsClientConfig(caFile string) (*tls.Config, error) {
	return mtls.ClientConfig(caFile, "", "", "")
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
