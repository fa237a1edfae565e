package daemon

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/localtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
)

// TestTCPListenerNeedsLocalToken runs the daemon on a Unix socket and a
// loopback TCP port: TCP calls need the local token, the socket does not.
func TestTCPListenerNeedsLocalToken(t *testing.T) {
	claudeBin := claudecli.Require(t)
	sockDir, err := os.MkdirTemp("", "bcd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	dataDir := filepath.Join(t.TempDir(), "data")

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan []net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Listen: []string{"unix://" + sock, "127.0.0.1:0"}, DataDir: dataDir, ClaudeBin: claudeBin,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
			Ready:  func(a []net.Addr) { ready <- a },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var tcpAddr string
	select {
	case addrs := <-ready:
		for _, a := range addrs {
			if a.Network() == "tcp" {
				tcpAddr = a.String()
			}
		}
	case err := <-done:
		t.Fatalf("daemon stopped before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not serve within 60s")
	}

	fi, err := os.Stat(localtoken.Path(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("local token file has mode %04o, want 0600", fi.Mode().Perm())
	}
	tok, err := localtoken.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	wrong := []byte(tok)
	wrong[0] ^= 1

	tests := []struct {
		name  string
		addr  string
		token string
		want  codes.Code
	}{
		{"tcp without token", tcpAddr, "", codes.Unauthenticated},
		{"tcp with a wrong token", tcpAddr, string(wrong), codes.Unauthenticated},
		{"tcp with the token", tcpAddr, tok, codes.OK},
		{"unix socket without token", "unix://" + sock, "", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := client.Dial(tt.addr, client.DialOptions{AgentToken: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			defer ccancel()
			_, err = pb.NewAgentServiceClient(conn).ListSessions(cctx, &pb.ListSessionsRequest{})
			if got := status.Code(err); got != tt.want {
				t.Fatalf("ListSessions: %v, want %v", err, tt.want)
			}
			if tt.want == codes.Unauthenticated && client.ExitCode(err) != client.ExitPermission {
				t.Fatalf("exit code %d, want %d", client.ExitCode(err), client.ExitPermission)
			}
		})
	}
}
