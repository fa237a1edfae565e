package relaylink

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/betcode-dev/betcode/agent/enroll"
	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// DefaultRenewEvery is how often the certificate's lifetime is checked
// while the tunnel is up (it is also checked each time the tunnel comes up).
const DefaultRenewEvery = time.Hour

// renewTimeout bounds one RenewCertificate call.
const renewTimeout = 30 * time.Second

// dueForRenewal reports whether leaf has less than a third of its lifetime
// left at now. A third leaves two renewal attempts' worth of slack for a
// 90-day certificate checked hourly, even across a long outage.
func dueForRenewal(leaf *x509.Certificate, now time.Time) bool {
	total := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotAfter.Sub(now) < total/3
}

// renewals checks the certificate now and then every RenewEvery until ctx
// ends, renewing it through api (the tunnel's own connection) when due.
func (l *Link) renewals(ctx context.Context, api pb.EnrollServiceClient, log *slog.Logger) {
	t := time.NewTicker(l.cfg.RenewEvery)
	defer t.Stop()
	for {
		if err := l.maybeRenew(ctx, api, log); err != nil && ctx.Err() == nil {
			l.renewFailed(err, log)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *Link) maybeRenew(ctx context.Context, api pb.EnrollServiceClient, log *slog.Logger) error {
	cert, err := l.certs.get()
	if err != nil {
		return err
	}
	if !dueForRenewal(cert.Leaf, l.cfg.Now()) {
		return nil
	}
	notAfter, err := l.renew(ctx, api, cert)
	if err != nil {
		return err
	}
	l.renewErr.Store("")
	log.Info("relay link: certificate renewed", "not_after", notAfter.UTC(), "was", cert.Leaf.NotAfter.UTC())
	return nil
}

// renew has the relay sign a CSR for the same key and writes the new
// certificate over the old one; the next handshake presents it.
func (l *Link) renew(ctx context.Context, api pb.EnrollServiceClient, cert *tls.Certificate) (time.Time, error) {
	key, ok := cert.PrivateKey.(crypto.Signer)
	if !ok {
		return time.Time{}, fmt.Errorf("renew certificate: key of type %T cannot sign a CSR", cert.PrivateKey)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cert.Leaf.Subject.CommonName},
	}, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("renew certificate: make CSR: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	resp, err := api.RenewCertificate(ctx, &pb.RenewCertificateRequest{CsrDer: csr})
	if err != nil {
		return time.Time{}, fmt.Errorf("renew certificate: %w", err)
	}
	fresh, err := enroll.CheckCertificate(resp.CertificatePem, key.Public())
	if err != nil {
		return time.Time{}, fmt.Errorf("renew certificate: the relay's answer: %w", err)
	}
	if !fresh.NotAfter.After(cert.Leaf.NotAfter) {
		return time.Time{}, fmt.Errorf("renew certificate: the relay's certificate expires %s, no later than the current one", fresh.NotAfter.UTC().Format(time.RFC3339))
	}
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(l.cfg.CertFile); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.Write(l.cfg.CertFile, resp.CertificatePem, perm); err != nil {
		return time.Time{}, fmt.Errorf("renew certificate: %w", err)
	}
	l.certs.forget()
	return fresh.NotAfter, nil
}

// renewFailed logs a failed renewal: at warn the first time this error is
// seen, at debug while it repeats (a relay without a CA key says the same
// every hour). The next check tries again.
func (l *Link) renewFailed(err error, log *slog.Logger) {
	level := slog.LevelWarn
	if prev, _ := l.renewErr.Swap(err.Error()).(string); prev == err.Error() {
		level = slog.LevelDebug
	}
	var expires any = "unknown"
	if cert, cerr := l.certs.get(); cerr == nil {
		expires = cert.Leaf.NotAfter.UTC()
	}
	log.Log(context.Background(), level, "relay link: certificate renewal failed; retrying at the next check",
		"err", err, "not_after", expires, "next_check_in", l.cfg.RenewEvery)
}
