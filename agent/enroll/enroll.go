// Package enroll turns a single-use join token into this machine's identity
// on a relay. The machine makes an ECDSA P-256 key, which never leaves it,
// and sends the relay a CSR with the token (EnrollService.Enroll, over TLS
// without a client certificate); the relay answers with the machine id and
// a certificate. Everything lands in <data-dir>/relay/, where `betcode-agent
// serve` finds it and relaylink renews the certificate before it expires.
package enroll

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// ErrEnrolled means the data directory holds an enrollment already.
var ErrEnrolled = errors.New("already enrolled")

// callTimeout bounds the Enroll call.
const callTimeout = 30 * time.Second

// Files are the paths of an enrollment in a data directory.
type Files struct {
	Dir  string // <data-dir>/relay, mode 0700
	Key  string // machine.key: the private key (0600)
	Cert string // machine.crt: the machine certificate
	CA   string // ca.crt: the CA of the relay and of machine certificates
	Info string // enrollment.json: Enrollment; written last
}

// FilesIn returns the enrollment files of dataDir.
func FilesIn(dataDir string) Files {
	dir := filepath.Join(dataDir, "relay")
	return Files{
		Dir:  dir,
		Key:  filepath.Join(dir, "machine.key"),
		Cert: filepath.Join(dir, "machine.crt"),
		CA:   filepath.Join(dir, "ca.crt"),
		Info: filepath.Join(dir, "enrollment.json"),
	}
}

// Enrollment is what enrollment.json records.
type Enrollment struct {
	Relay     string    `json:"relay"`
	MachineID string    `json:"machine_id"`
	Name      string    `json:"name,omitempty"`
	TeamID    string    `json:"team_id,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	NotAfter  time.Time `json:"not_after"` // of the certificate enroll received
}

// Load reads the enrollment in dataDir; the error wraps fs.ErrNotExist when
// the machine is not enrolled.
func Load(dataDir string) (*Enrollment, Files, error) {
	f := FilesIn(dataDir)
	b, err := os.ReadFile(f.Info)
	if err != nil {
		return nil, f, fmt.Errorf("read enrollment: %w", err)
	}
	var e Enrollment
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, f, fmt.Errorf("read enrollment %s: %w", f.Info, err)
	}
	if e.Relay == "" || e.MachineID == "" {
		return nil, f, fmt.Errorf("enrollment %s names no relay or machine: enroll again with --force", f.Info)
	}
	return &e, f, nil
}

// Config configures Run.
type Config struct {
	Relay   string // host:port
	CAFile  string // CA to verify the relay with (empty: the system roots)
	Token   string // the join token, bcj_…
	Name    string // display name (default: the hostname)
	DataDir string // the agent's data directory
	Force   bool   // replace an existing enrollment
}

// Validate checks c without touching the network or the disk.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Relay); err != nil {
		return fmt.Errorf("--relay %q: want HOST:PORT", c.Relay)
	}
	if c.Token == "" {
		return errors.New("no join token: pass --token, set BETCODE_JOIN_TOKEN, or --token - to read it from stdin")
	}
	if err := authtoken.Check(authtoken.Join, c.Token); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	if c.DataDir == "" {
		return errors.New("no data directory")
	}
	return nil
}

// Run enrolls the machine: it makes a key, has the relay sign a CSR for it
// and writes the files. An existing enrollment is kept unless cfg.Force,
// and replaced only once the relay has answered.
func Run(ctx context.Context, cfg Config) (*Enrollment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	files := FilesIn(cfg.DataDir)
	if _, err := os.Stat(files.Info); err == nil && !cfg.Force {
		what := "(" + files.Info + ")"
		if old, _, err := Load(cfg.DataDir); err == nil {
			what = fmt.Sprintf("as machine %s with %s (%s)", old.MachineID, old.Relay, files.Info)
		}
		return nil, fmt.Errorf("%w %s: pass --force to enroll again", ErrEnrolled, what)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make machine key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cfg.Name}}, key)
	if err != nil {
		return nil, fmt.Errorf("make CSR: %w", err)
	}
	resp, err := call(ctx, cfg, csr)
	if err != nil {
		return nil, err
	}
	cert, err := CheckCertificate(resp.CertificatePem, key.Public())
	if err != nil {
		return nil, fmt.Errorf("the relay's answer: %w", err)
	}
	if err := mtls.ValidateMachineID(resp.MachineId); err != nil {
		return nil, fmt.Errorf("the relay's answer: %w", err)
	}
	caPEM := resp.CaPem
	if len(caPEM) == 0 && cfg.CAFile != "" {
		if caPEM, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("read --relay-ca: %w", err)
		}
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the relay sent no CA certificate: pass --relay-ca")
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode machine key: %w", err)
	}
	e := &Enrollment{
		Relay: cfg.Relay, MachineID: resp.MachineId, Name: cfg.Name,
		TeamID: resp.TeamId, Owner: resp.OwnerUserId, NotAfter: cert.NotAfter.UTC(),
	}
	info, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode enrollment: %w", err)
	}
	if err := os.MkdirAll(files.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", files.Dir, err)
	}
	for _, w := range []struct {
		path string
		data []byte
		perm fs.FileMode
	}{
		{files.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600},
		{files.Cert, resp.CertificatePem, 0o644},
		{files.CA, caPEM, 0o644},
		{files.Info, append(info, '\n'), 0o644}, // last: it marks a complete enrollment
	} {
		if err := atomicfile.Write(w.path, w.data, w.perm); err != nil {
			return nil, fmt.Errorf("save enrollment: %w", err)
		}
	}
	return e, nil
}

// call sends the Enroll request.
func call(ctx context.Context, cfg Config, csr []byte) (*pb.EnrollResponse, error) {
	host, _, _ := net.SplitHostPort(cfg.Relay)
	tlsCfg, err := mtls.ClientConfig(cfg.CAFile, "", "", host)
	if err != nil {
		return nil, fmt.Errorf("--relay-ca: %w", err)
	}
	cc, err := grpc.NewClient(cfg.Relay, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.Relay, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := pb.NewEnrollServiceClient(cc).Enroll(ctx, &pb.EnrollRequest{JoinToken: cfg.Token, CsrDer: csr, Name: cfg.Name})
	if err == nil {
		return resp, nil
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		return nil, fmt.Errorf("cannot reach relay %s: %s", cfg.Relay, mtls.DescribeHandshakeError(errors.New(st.Message())))
	case codes.Canceled:
		return nil, fmt.Errorf("enroll: %w", ctx.Err())
	}
	return nil, fmt.Errorf("relay %s refused to enroll this machine: %s", cfg.Relay, st.Message())
}

// CheckCertificate parses a PEM certificate and checks that it is for the
// public key pub: a certificate for another key would lock the machine out
// at its next connection.
func CheckCertificate(certPEM []byte, pub crypto.PublicKey) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	want, ok := pub.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !want.Equal(cert.PublicKey) {
		return nil, errors.New("the certificate is for another key")
	}
	return cert, nil
}
