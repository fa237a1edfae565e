package relaylink

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certFile is the machine's certificate and key on disk. TLS handshakes
// take the certificate from here (GetClientCertificate) rather than from a
// fixed list, so a renewed certificate — or one an operator replaced — is
// used from the next handshake on. The pair is reloaded when the
// certificate file's modification time or size changes.
type certFile struct {
	certPath, keyPath string

	mu    sync.Mutex
	cert  *tls.Certificate
	mtime time.Time
	size  int64
}

// get returns the current certificate, with its Leaf.
func (c *certFile) get() (*tls.Certificate, error) {
	fi, err := os.Stat(c.certPath)
	if err != nil {
		return nil, fmt.Errorf("machine certificate: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && fi.ModTime().Equal(c.mtime) && fi.Size() == c.size {
		return c.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return nil, fmt.Errorf("load machine certificate %q and key %q: %w", c.certPath, c.keyPath, err)
	}
	c.cert, c.mtime, c.size = &pair, fi.ModTime(), fi.Size()
	return c.cert, nil
}

// forget drops the cached pair, so that the next get reads the files
// (after a renewal, whatever the file system's timestamp granularity).
func (c *certFile) forget() {
	c.mu.Lock()
	c.cert = nil
	c.mu.Unlock()
}

// getClientCertificate is tls.Config.GetClientCertificate.
func (c *certFile) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.get()
}
