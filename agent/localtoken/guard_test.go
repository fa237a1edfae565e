package localtoken

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/testpki"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// guardedServer is a gRPC server behind a Guard with a unary service
// (VersionService), a streaming one (reflection) and the health service.
func guardedServer(t *testing.T) *grpc.Server {
	g := NewGuard(token, "/data/local-token")
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(g.UnaryInterceptor), grpc.ChainStreamInterceptor(g.StreamInterceptor))
	pb.RegisterVersionServiceServer(srv, &server.Version{ServerVersion: "test"})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	t.Cleanup(srv.Stop)
	return srv
}

func serve(t *testing.T, srv interface{ Serve(net.Listener) error }, l net.Listener) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
}

func loopback(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// tunnelListener hands out connections that look like the relay tunnel's.
type tunnelListener struct{ net.Listener }

func (l tunnelListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tunnelConn{c}, nil
}

type tunnelConn struct{ net.Conn }

func (tunnelConn) RemoteAddr() net.Addr { return tunnel.Addr("relay:test") }
func (tunnelConn) LocalAddr() net.Addr  { return tunnel.Addr("machine") }

func TestGuard(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := guardedServer(t)

	tcp := loopback(t)
	serve(t, srv, tcp)

	sockDir, err := os.MkdirTemp("", "lt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	unix, err := net.Listen("unix", filepath.Join(sockDir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv, unix)

	tlsL := loopback(t)
	serve(t, srv, TLSListener(tls.NewListener(tlsL, ca.ServerTLS(t))))

	tun := loopback(t)
	serve(t, srv, tunnelListener{tun})

	// The relay tunnel's other path: grpc-go's ServeHTTP, as an h2c server.
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	marked := loopback(t)
	serve(t, &http.Server{Handler: TunnelHandler(srv), Protocols: protos}, marked)
	unmarked := loopback(t)
	serve(t, &http.Server{Handler: srv, Protocols: protos}, unmarked)

	certPEM, keyPEM := ca.Machine(t, "m1", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	clientCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	plain := insecure.NewCredentials()
	tlsNoCert := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	tlsCert := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{clientCert}})

	tests := []struct {
		name   string
		target string
		creds  credentials.TransportCredentials
		auth   string // authorization header; empty: none
		want   codes.Code
	}{
		{"tcp without token", tcp.Addr().String(), plain, "", codes.Unauthenticated},
		{"tcp with wrong token", tcp.Addr().String(), plain, "Bearer " + token[:63] + "0", codes.Unauthenticated},
		{"tcp with a short token", tcp.Addr().String(), plain, "Bearer " + token[:10], codes.Unauthenticated},
		{"tcp with another scheme", tcp.Addr().String(), plain, "Basic " + token, codes.Unauthenticated},
		{"tcp with token", tcp.Addr().String(), plain, "Bearer " + token, codes.OK},
		{"tcp with lowercase scheme", tcp.Addr().String(), plain, "bearer " + token, codes.OK},
		{"unix socket", "unix://" + unix.Addr().String(), plain, "", codes.OK},
		{"tls without client certificate", tlsL.Addr().String(), tlsNoCert, "", codes.Unauthenticated},
		{"tls without client certificate, with token", tlsL.Addr().String(), tlsNoCert, "Bearer " + token, codes.OK},
		{"tls with verified client certificate", tlsL.Addr().String(), tlsCert, "", codes.OK},
		{"tunnel connection", tun.Addr().String(), plain, "", codes.OK},
		{"tunnel handler", marked.Addr().String(), plain, "", codes.OK},
		{"ServeHTTP without the tunnel mark", unmarked.Addr().String(), plain, "", codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := grpc.NewClient(tt.target, grpc.WithTransportCredentials(tt.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.auth != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tt.auth)
			}

			_, err = pb.NewVersionServiceClient(cc).GetVersion(ctx, &pb.GetVersionRequest{})
			if got := status.Code(err); got != tt.want {
				t.Fatalf("unary call: %v, want %v", err, tt.want)
			}
			if tt.want == codes.Unauthenticated {
				if msg := status.Convert(err).Message(); !strings.Contains(msg, "local token") || strings.Contains(msg, token) {
					t.Fatalf("refusal %q: want a hint about the local token, without the token", msg)
				}
			}

			stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
			if err == nil {
				err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
				// Send reports io.EOF when the server already ended the
				// stream (here: refused it); Recv then has the status.
				if err == nil || errors.Is(err, io.EOF) {
					_, err = stream.Recv()
				}
			}
			if got := status.Code(err); got != tt.want {
				t.Fatalf("streaming call: %v, want %v", err, tt.want)
			}

			// Health checks stay open to everyone.
			if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("health check: %v", err)
			}
		})
	}
}

func TestRefusalNamesTheFileOnlyToLoopback(t *testing.T) {
	srv := guardedServer(t)
	l := loopback(t)
	serve(t, srv, l)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pb.NewVersionServiceClient(cc).GetVersion(ctx, &pb.GetVersionRequest{})
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "/data/local-token") {
		t.Fatalf("refusal %q does not name the token file", msg)
	}
	g := NewGuard(token, "/data/local-token")
	err = g.check(context.Background(), "/betcode.v1.VersionService/GetVersion")
	if msg := status.Convert(err).Message(); strings.Contains(msg, "/data/") || !strings.Contains(msg, "<data-dir>/local-token") {
		t.Fatalf("refusal to an unknown peer %q: want the generic path", msg)
	}
}
