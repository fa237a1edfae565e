package pki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func mustInit(t *testing.T, dir string) *Result {
	t.Helper()
	res, err := Init(dir, []string{"localhost", "127.0.0.1"}, Options{})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return res
}

func TestInitWritesCAAndRelay(t *testing.T) {
	// An unfriendly umask must not change the modes; not parallel because
	// the umask is per process.
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })

	dir := filepath.Join(t.TempDir(), "pki")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := Init(dir, []string{"localhost", " 127.0.0.1", "Relay.Example.com", "localhost"}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		mode fs.FileMode
	}{
		{CAKeyFile, 0o600}, {CACertFile, 0o644}, {RelayKeyFile, 0o600}, {RelayCertFile, 0o644},
	}
	if len(res.Files) != len(want) {
		t.Fatalf("Files = %v, want %d files", res.Files, len(want))
	}
	for i, w := range want {
		if got := filepath.Join(dir, w.name); res.Files[i] != got {
			t.Errorf("Files[%d] = %s, want %s", i, res.Files[i], got)
		}
		fi, err := os.Stat(res.Files[i])
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != w.mode {
			t.Errorf("%s mode = %v, want %v", w.name, fi.Mode().Perm(), w.mode)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("dir holds %d entries, want 4 (temporary files left?)", len(entries))
	}

	ca := readCert(t, filepath.Join(dir, CACertFile))
	if !ca.IsCA || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v MaxPathLenZero=%v KeyUsage=%v", ca.IsCA, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if got := ca.NotAfter.Sub(now); got != DefaultCALifetime {
		t.Errorf("CA lifetime = %v, want %v", got, DefaultCALifetime)
	}
	if ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA key algorithm = %v, want ECDSA", ca.PublicKeyAlgorithm)
	}

	relay := readCert(t, filepath.Join(dir, RelayCertFile))
	if !relay.Equal(res.Cert) || !ca.Equal(res.CA) {
		t.Error("Result certificates differ from the files")
	}
	if got := relay.NotAfter.Sub(now); got != DefaultServerLifetime {
		t.Errorf("relay lifetime = %v, want %v", got, DefaultServerLifetime)
	}
	if got := now.Sub(relay.NotBefore); got != backdate {
		t.Errorf("relay backdated by %v, want %v", got, backdate)
	}
	if strings.Join(relay.DNSNames, ",") != "localhost,relay.example.com" {
		t.Errorf("DNSNames = %v", relay.DNSNames)
	}
	if len(relay.IPAddresses) != 1 || relay.IPAddresses[0].String() != "127.0.0.1" {
		t.Errorf("IPAddresses = %v", relay.IPAddresses)
	}
	if len(relay.ExtKeyUsage) != 2 || relay.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || relay.ExtKeyUsage[1] != x509.ExtKeyUsageClientAuth {
		t.Errorf("relay ExtKeyUsage = %v, want serverAuth and clientAuth (replica to replica)", relay.ExtKeyUsage)
	}
	if name, err := mtls.RelayName(relay); err != nil || name != "betcode-relay" {
		t.Errorf("RelayName = %q, %v; want betcode-relay", name, err)
	}
	if err := relay.CheckSignatureFrom(ca); err != nil {
		t.Errorf("relay not signed by CA: %v", err)
	}
}

func TestIssueMachine(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	now := time.Now()
	res, err := IssueMachine(dir, "laptop-1.home_x", Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{filepath.Join(dir, "machines", "laptop-1.home_x.key"), filepath.Join(dir, "machines", "laptop-1.home_x.crt")}
	if strings.Join(res.Files, " ") != strings.Join(wantFiles, " ") {
		t.Errorf("Files = %v, want %v", res.Files, wantFiles)
	}
	for _, f := range []struct {
		path string
		mode fs.FileMode
	}{{wantFiles[0], 0o600}, {wantFiles[1], 0o644}, {filepath.Join(dir, "machines"), 0o700}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s mode = %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}
	cert := readCert(t, wantFiles[1])
	if cert.Subject.CommonName != "laptop-1.home_x" {
		t.Errorf("CN = %q", cert.Subject.CommonName)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "betcode://machine/laptop-1.home_x" {
		t.Errorf("URIs = %v", cert.URIs)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("ExtKeyUsage = %v, want clientAuth only", cert.ExtKeyUsage)
	}
	if len(cert.DNSNames)+len(cert.IPAddresses) != 0 || cert.IsCA {
		t.Errorf("machine certificate has host names or is a CA")
	}
	if got := cert.NotAfter.Sub(now.Truncate(time.Second)); got < DefaultMachineLifetime-time.Second || got > DefaultMachineLifetime {
		t.Errorf("machine lifetime = %v, want %v", got, DefaultMachineLifetime)
	}
	if err := cert.CheckSignatureFrom(readCert(t, filepath.Join(dir, CACertFile))); err != nil {
		t.Errorf("machine certificate not signed by CA: %v", err)
	}
}

func TestMachineLifetimeCappedByCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, []string{"localhost"}, Options{CALifetime: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	res, err := IssueMachine(dir, "m1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cert.NotAfter.Equal(res.CA.NotAfter) {
		t.Errorf("machine NotAfter = %v, want the CA's %v", res.Cert.NotAfter, res.CA.NotAfter)
	}
}

func TestRefuseOverwrite(t *testing.T) {
	hosts := []string{"localhost"}
	tests := []struct {
		name    string
		second  func(dir string) (*Result, error)
		wantErr bool
		// caKept says whether the CA must survive the second call.
		caKept bool
	}{
		{"init twice", func(dir string) (*Result, error) { return Init(dir, hosts, Options{}) }, true, true},
		{"init with force", func(dir string) (*Result, error) { return Init(dir, hosts, Options{Force: true}) }, false, false},
		{"relay without force", func(dir string) (*Result, error) { return IssueRelay(dir, hosts, Options{}) }, true, true},
		{"relay with force", func(dir string) (*Result, error) { return IssueRelay(dir, hosts, Options{Force: true}) }, false, true},
		{"machine twice", func(dir string) (*Result, error) { return IssueMachine(dir, "m1", Options{}) }, true, true},
		{"machine with force", func(dir string) (*Result, error) { return IssueMachine(dir, "m1", Options{Force: true}) }, false, true},
		{"another machine", func(dir string) (*Result, error) { return IssueMachine(dir, "m2", Options{}) }, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			mustInit(t, dir)
			if _, err := IssueMachine(dir, "m1", Options{}); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			res, err := tt.second(dir)
			after := snapshot(t, dir)
			if tt.wantErr {
				if !errors.Is(err, fs.ErrExist) {
					t.Fatalf("err = %v, want fs.ErrExist", err)
				}
				if !strings.Contains(err.Error(), "refusing to overwrite") {
					t.Errorf("err = %q, want it to say it refuses to overwrite", err)
				}
				if !equalMaps(before, after) {
					t.Error("a refused call changed the directory")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range res.Files {
				rel, _ := filepath.Rel(dir, f)
				if bytes.Equal(before[rel], after[rel]) {
					t.Errorf("%s reported written but unchanged", rel)
				}
			}
			if caKept := bytes.Equal(before[CACertFile], after[CACertFile]); caKept != tt.caKept {
				t.Errorf("CA kept = %v, want %v", caKept, tt.caKept)
			}
		})
	}
}

// snapshot maps every file under dir (relative path) to its contents.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		m[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equalMaps(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestMachineID(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	tests := []struct {
		id string
		ok bool
	}{
		{"m", true},
		{"host-1.example_X", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"a/b", false},
		{"../ca", false},
		{"with space", false},
		{"naïve", false},
		{"a%2Fb", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			_, err := IssueMachine(dir, tt.id, Options{})
			if tt.ok && err != nil {
				t.Fatalf("IssueMachine(%q): %v", tt.id, err)
			}
			if !tt.ok {
				if !errors.Is(err, mtls.ErrInvalidMachineID) {
					t.Fatalf("IssueMachine(%q) err = %v, want ErrInvalidMachineID", tt.id, err)
				}
				if !strings.Contains(err.Error(), "A-Z a-z 0-9 . _ -") {
					t.Errorf("err = %q, want it to say what is allowed", err)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		call func(t *testing.T, dir string) error
		want string
	}{
		{"no hosts", func(t *testing.T, dir string) error { _, err := Init(dir, nil, Options{}); return err }, "no hosts"},
		{"blank hosts", func(t *testing.T, dir string) error { _, err := Init(dir, []string{" ", ""}, Options{}); return err }, "no hosts"},
		{"bad host", func(t *testing.T, dir string) error { _, err := Init(dir, []string{"bad host"}, Options{}); return err }, `invalid host "bad host"`},
		{"bad label", func(t *testing.T, dir string) error {
			_, err := Init(dir, []string{"-x.example.com"}, Options{})
			return err
		}, "invalid host"},
		{"negative lifetime", func(t *testing.T, dir string) error {
			_, err := Init(dir, []string{"localhost"}, Options{ServerLifetime: -time.Hour})
			return err
		}, "negative"},
		{"machine without CA", func(t *testing.T, dir string) error { _, err := IssueMachine(dir, "m1", Options{}); return err }, "certs init"},
		{"relay without CA", func(t *testing.T, dir string) error {
			_, err := IssueRelay(dir, []string{"localhost"}, Options{})
			return err
		}, "certs init"},
		{"expired CA", func(t *testing.T, dir string) error {
			past := func() time.Time { return time.Now().Add(-3 * time.Hour) }
			if _, err := Init(dir, []string{"localhost"}, Options{Now: past, CALifetime: time.Hour}); err != nil {
				return err
			}
			_, err := IssueMachine(dir, "m1", Options{})
			return err
		}, "expired"},
		{"key does not match CA", func(t *testing.T, dir string) error {
			mustInit(t, dir)
			other := t.TempDir()
			mustInit(t, other)
			key, err := os.ReadFile(filepath.Join(other, CAKeyFile))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, CAKeyFile), key, 0o600); err != nil {
				return err
			}
			_, err = IssueMachine(dir, "m1", Options{})
			return err
		}, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
