package enroll

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/internal/testpki"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// fakeRelay serves EnrollService over TLS on loopback: it signs the CSR
// of a known join token, or answers with refuse.
type fakeRelay struct {
	pb.UnimplementedEnrollServiceServer
	ca      *testpki.CA
	token   string
	refuse  error
	badCert bool // sign a certificate for another key
	addr    string
	caFile  string
}

func startRelay(t *testing.T, token string) *fakeRelay {
	t.Helper()
	ca := testpki.NewCA(t)
	r := &fakeRelay{ca: ca, token: token, caFile: ca.WriteCA(t, t.TempDir())}
	r.addr = ca.Serve(t, func(srv *grpc.Server) {
		pb.RegisterEnrollServiceServer(srv, r)
	})
	return r
}

func (r *fakeRelay) Enroll(ctx context.Context, req *pb.EnrollRequest) (*pb.EnrollResponse, error) {
	if r.refuse != nil {
		return nil, r.refuse
	}
	if req.JoinToken != r.token {
		return nil, status.Error(codes.Unauthenticated, "unknown join token")
	}
	if req.Name != "box" {
		return nil, status.Errorf(codes.InvalidArgument, "name %q", req.Name)
	}
	csr := req.CsrDer
	if r.badCert {
		other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if csr, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, other); err != nil {
			return nil, err
		}
	}
	notAfter := time.Now().Add(90 * 24 * time.Hour).Truncate(time.Second)
	cert, err := r.ca.SignCSR(csr, "m-42", time.Now().Add(-time.Minute), notAfter)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.EnrollResponse{MachineId: "m-42", CertificatePem: cert, CaPem: r.ca.PEM,
		NotAfter: timestamppb.New(notAfter), TeamId: "core", OwnerUserId: "alice"}, nil
}

func joinToken(t *testing.T) string {
	t.Helper()
	tok, err := authtoken.New(authtoken.Join)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestEnroll(t *testing.T) {
	tok := joinToken(t)
	relay := startRelay(t, tok)
	dataDir := t.TempDir()
	cfg := Config{Relay: relay.addr, CAFile: relay.caFile, Token: tok, Name: "box", DataDir: dataDir}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	e, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.MachineID != "m-42" || e.TeamID != "core" || e.Owner != "alice" || e.Relay != relay.addr || e.NotAfter.IsZero() {
		t.Fatalf("enrollment %+v", e)
	}
	files := FilesIn(dataDir)
	for p, mode := range map[string]os.FileMode{files.Dir: 0o700, files.Key: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", p, fi.Mode().Perm(), mode)
		}
	}
	// The files make a key pair that verifies against the stored CA.
	pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatalf("machine.crt and machine.key: %v", err)
	}
	ca, _ := os.ReadFile(files.CA)
	if string(ca) != string(relay.ca.PEM) {
		t.Fatal("ca.crt is not the relay's CA")
	}
	if !pair.Leaf.NotAfter.Equal(e.NotAfter) {
		t.Fatalf("not_after %v, certificate says %v", e.NotAfter, pair.Leaf.NotAfter)
	}
	loaded, _, err := Load(dataDir)
	if err != nil || *loaded != *e {
		t.Fatalf("Load = %+v, %v; want %+v", loaded, err, e)
	}

	// A second enrollment needs --force, and keeps the first until then.
	key1, _ := os.ReadFile(files.Key)
	if _, err := Run(ctx, cfg); !errors.Is(err, ErrEnrolled) || !strings.Contains(err.Error(), "m-42") {
		t.Fatalf("second Run: %v, want ErrEnrolled naming m-42", err)
	}
	if key2, _ := os.ReadFile(files.Key); string(key2) != string(key1) {
		t.Fatal("a refused enrollment replaced the key")
	}
	cfg.Force = true
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatalf("Run with Force: %v", err)
	}
	if key2, _ := os.ReadFile(files.Key); string(key2) == string(key1) {
		t.Fatal("Force kept the old key")
	}
}

func TestEnrollRefused(t *testing.T) {
	tok := joinToken(t)
	typo := []byte(tok)
	if typo[8] == '0' {
		typo[8] = '1'
	} else {
		typo[8] = '0'
	}
	client, err := authtoken.New(authtoken.Client)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		token   string
		refuse  error
		badCert bool
		want    string
	}{
		{"expired", tok, status.Error(codes.Unauthenticated, "join token expired"), false, "refused to enroll this machine: join token expired"},
		{"used", tok, status.Error(codes.Unauthenticated, "join token already used"), false, "join token already used"},
		{"unknown", joinToken(t), nil, false, "unknown join token"},
		{"client token", client, nil, false, "this is a client token"},
		{"typo", string(typo), nil, false, "checksum"},
		{"certificate for another key", tok, nil, true, "the certificate is for another key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			relay := startRelay(t, tok)
			relay.refuse, relay.badCert = tt.refuse, tt.badCert
			dataDir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Run(ctx, Config{Relay: relay.addr, CAFile: relay.caFile, Token: tt.token, Name: "box", DataDir: dataDir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Fatalf("error %q shows the token", err)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "relay")); !os.IsNotExist(err) {
				t.Fatalf("files written after a failed enrollment: %v", err)
			}
		})
	}
}

func TestEnrollUntrustedRelay(t *testing.T) {
	tok := joinToken(t)
	relay := startRelay(t, tok)
	other := testpki.NewCA(t).WriteCA(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Run(ctx, Config{Relay: relay.addr, CAFile: other, Token: tok, Name: "box", DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach relay") || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("Run = %v, want a refusal of the relay's certificate", err)
	}
}
