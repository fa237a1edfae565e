package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// File names inside a PKI directory.
const (
	CACertFile    = "ca.crt"
	CAKeyFile     = "ca.key"
	RelayCertFile = "relay.crt"
	RelayKeyFile  = "relay.key"
	MachinesDir   = "machines"
)

// MachineCertFile is the path, relative to a PKI directory, of machine id's
// certificate.
func MachineCertFile(id string) string { return filepath.Join(MachinesDir, id+".crt") }

// MachineKeyFile is the path, relative to a PKI directory, of machine id's
// key.
func MachineKeyFile(id string) string { return filepath.Join(MachinesDir, id+".key") }

// Result is what one call wrote.
type Result struct {
	// Files are the paths written, in the order written.
	Files []string
	// Cert is the certificate issued: the relay's for Init and IssueRelay,
	// the machine's for IssueMachine.
	Cert *x509.Certificate
	// CA is the certificate that signed Cert.
	CA *x509.Certificate
}

// Init creates a new CA in dir and the relay's server certificate for hosts
// (DNS names or IP addresses) signed by it. It refuses to touch dir if any of
// the four files exists, unless opt.Force; note that a new CA invalidates
// every machine certificate issued by the old one.
func Init(dir string, hosts []string, opt Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	dns, ips, err := parseHosts(hosts)
	if err != nil {
		return nil, err
	}
	if err := refuseExisting(dir, opt.Force, CAKeyFile, CACertFile, RelayKeyFile, RelayCertFile); err != nil {
		return nil, err
	}
	now := opt.Now()
	ca, err := newCA(now, opt.CALifetime)
	if err != nil {
		return nil, err
	}
	relay, err := ca.asCA().issue(serverTemplate(dns, ips), now, opt.ServerLifetime)
	if err != nil {
		return nil, err
	}
	w := writer{dir: dir, force: opt.Force}
	w.put(CAKeyFile, ca.keyPEM, keyMode)
	w.put(CACertFile, ca.certPEM, certMode)
	w.put(RelayKeyFile, relay.keyPEM, keyMode)
	w.put(RelayCertFile, relay.certPEM, certMode)
	if w.err != nil {
		return nil, w.err
	}
	return &Result{Files: w.files, Cert: relay.cert, CA: ca.cert}, nil
}

// IssueRelay replaces the relay's server certificate and key in dir with new
// ones for hosts, signed by the existing CA: the yearly rotation. Without
// opt.Force it only writes where no relay certificate exists yet.
func IssueRelay(dir string, hosts []string, opt Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	dns, ips, err := parseHosts(hosts)
	if err != nil {
		return nil, err
	}
	if err := refuseExisting(dir, opt.Force, RelayKeyFile, RelayCertFile); err != nil {
		return nil, err
	}
	now := opt.Now()
	ca, err := loadCA(dir, now)
	if err != nil {
		return nil, err
	}
	relay, err := ca.issue(serverTemplate(dns, ips), now, opt.ServerLifetime)
	if err != nil {
		return nil, err
	}
	w := writer{dir: dir, force: opt.Force}
	w.put(RelayKeyFile, relay.keyPEM, keyMode)
	w.put(RelayCertFile, relay.certPEM, certMode)
	if w.err != nil {
		return nil, w.err
	}
	return &Result{Files: w.files, Cert: relay.cert, CA: ca.cert}, nil
}

// IssueMachine writes a client certificate and key for machine machineID,
// signed by the CA in dir, to dir/machines/<ID>.crt and .key. With
// opt.Owner set, the certificate also names the machine's owner. It refuses
// to replace an existing certificate of that machine unless opt.Force.
func IssueMachine(dir, machineID string, opt Options) (*Result, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	if err := mtls.ValidateMachineID(machineID); err != nil {
		return nil, err
	}
	var owner *mtls.Owner
	if opt.Owner != "" {
		o, err := mtls.ParseOwner(opt.Owner)
		if err != nil {
			return nil, err
		}
		owner = &o
	}
	certFile, keyFile := MachineCertFile(machineID), MachineKeyFile(machineID)
	if err := refuseExisting(dir, opt.Force, keyFile, certFile); err != nil {
		return nil, err
	}
	now := opt.Now()
	ca, err := loadCA(dir, now)
	if err != nil {
		return nil, err
	}
	machine, err := ca.issue(machineTemplate(machineID, owner), now, opt.MachineLifetime)
	if err != nil {
		return nil, err
	}
	w := writer{dir: dir, force: opt.Force}
	w.put(keyFile, machine.keyPEM, keyMode)
	w.put(certFile, machine.certPEM, certMode)
	if w.err != nil {
		return nil, w.err
	}
	return &Result{Files: w.files, Cert: machine.cert, CA: ca.cert}, nil
}

// parseHosts splits the relay's names into DNS names and IP addresses.
func parseHosts(hosts []string) (dns []string, ips []net.IP, err error) {
	seen := map[string]bool{}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if !validDNSName(h) {
			return nil, nil, fmt.Errorf("invalid host %q: want a DNS name (e.g. relay.example.com, *.example.com) or an IP address", h)
		}
		dns = append(dns, strings.ToLower(h))
	}
	if len(dns)+len(ips) == 0 {
		return nil, nil, errors.New("no hosts: the relay certificate needs at least one DNS name or IP address")
	}
	return dns, ips, nil
}

func validDNSName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for i, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "*" && i == 0 {
			continue
		}
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// refuseExisting fails, naming every one of them, if any of files (relative
// to dir) exists and force is off.
func refuseExisting(dir string, force bool, files ...string) error {
	if force {
		return nil
	}
	var existing []string
	for _, f := range files {
		p := filepath.Join(dir, f)
		if _, err := os.Lstat(p); err == nil {
			existing = append(existing, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", p, err)
		}
	}
	if len(existing) > 0 {
		return fmt.Errorf("refusing to overwrite %s (--force replaces them): %w", strings.Join(existing, ", "), fs.ErrExist)
	}
	return nil
}
