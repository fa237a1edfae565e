package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// DescribeHandshakeError turns a TLS handshake error into a one-line reason
// fit for a log line or a CLI message, such as "client certificate signed by
// unknown authority (subject "CN=m1", issuer "CN=Other CA")" or "no client
// certificate". It reads the typed errors of crypto/tls and crypto/x509 and,
// for errors that have lost their type (gRPC flattens handshake errors into
// status messages), their text. Unknown errors come back as their text on one
// line.
func DescribeHandshakeError(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := describeTyped(err); ok {
		return s
	}
	msg := oneLine(err.Error())
	if s, ok := describeText(msg); ok {
		return s
	}
	return msg
}

func describeTyped(err error) (string, bool) {
	var leaf *x509.Certificate
	if ve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok && len(ve.UnverifiedCertificates) > 0 {
		leaf = ve.UnverifiedCertificates[0]
	}
	if e, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		if e.Cert != nil {
			leaf = e.Cert
		}
		return role(leaf) + "certificate signed by unknown authority" + names(leaf), true
	}
	if e, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		if e.Cert != nil {
			leaf = e.Cert
		}
		switch e.Reason {
		case x509.Expired:
			if strings.Contains(e.Detail, "is before") {
				return role(leaf) + "certificate is not yet valid" + validity(leaf, false) + names(leaf), true
			}
			return role(leaf) + "certificate has expired" + validity(leaf, true) + names(leaf), true
		case x509.IncompatibleUsage:
			return role(leaf) + "certificate is not valid for this use (extended key usage)" + names(leaf), true
		case x509.NotAuthorizedToSign:
			return role(leaf) + "certificate chain has an issuer that is not a CA" + names(leaf), true
		}
		return role(leaf) + "certificate is invalid: " + oneLine(e.Error()), true
	}
	if e, ok := errors.AsType[x509.HostnameError](err); ok {
		valid := "no names"
		if e.Certificate != nil {
			var all []string
			all = append(all, e.Certificate.DNSNames...)
			for _, ip := range e.Certificate.IPAddresses {
				all = append(all, ip.String())
			}
			if len(all) > 0 {
				valid = strings.Join(all, ", ")
			}
		}
		return "server certificate is not valid for " + e.Host + " (valid for " + valid + ")", true
	}
	if errors.Is(err, ErrNoClientCert) {
		return "no client certificate", true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return "peer does not speak TLS", true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "handshake timed out", true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return "connection closed during handshake", true
	}
	if e, ok := errors.AsType[*net.OpError](err); ok && e.Op == "remote error" && e.Err != nil {
		return describeAlert(strings.TrimPrefix(e.Err.Error(), "tls: ")), true
	}
	return "", false
}

// describeText recognizes the messages of crypto/tls and crypto/x509 in
// errors that lost their type.
func describeText(msg string) (string, bool) {
	if i := strings.Index(msg, "remote error: tls: "); i >= 0 {
		// The alert's text is words; cut off whatever quoting or context
		// the message wraps around it.
		alert := msg[i+len("remote error: tls: "):]
		if j := strings.IndexFunc(alert, func(r rune) bool { return !unicode.IsLetter(r) && r != ' ' }); j >= 0 {
			alert = alert[:j]
		}
		return describeAlert(strings.TrimSpace(alert)), true
	}
	for _, m := range []struct{ substr, reason string }{
		{"tls: client didn't provide a certificate", "no client certificate"},
		{"x509: certificate signed by unknown authority", "certificate signed by unknown authority"},
		{"x509: certificate has expired or is not yet valid", "certificate has expired or is not yet valid"},
		{"x509: certificate is valid for", "server certificate is not valid for the dialled name"},
		{"x509: certificate specifies an incompatible key usage", "certificate is not valid for this use (extended key usage)"},
		{"tls: first record does not look like a TLS handshake", "peer does not speak TLS"},
		{"unsupported versions", "peer does not support TLS 1.3"},
		{"unsupported protocol version", "peer does not support TLS 1.3"},
	} {
		if strings.Contains(msg, m.substr) {
			return m.reason, true
		}
	}
	return "", false
}

// describeAlert explains an alert the peer sent, which is the peer refusing
// something of ours.
func describeAlert(alert string) string {
	switch alert {
	case "certificate required":
		return "no client certificate (the server requires one)"
	case "unknown certificate authority":
		return "peer refused our certificate: signed by unknown authority"
	case "expired certificate":
		return "peer refused our certificate: certificate has expired"
	case "bad certificate", "unsupported certificate", "unknown certificate":
		return "peer refused our certificate (" + alert + ")"
	case "protocol version not supported":
		return "peer does not support TLS 1.3"
	case "no application protocol":
		return "peer does not speak h2 (ALPN)"
	}
	return "peer sent TLS alert: " + alert
}

// role names whose certificate leaf is: a relay's (URI SAN betcode://relay/,
// serverAuth and clientAuth, as replicas also dial each other) is the
// server's; otherwise its extended key usage says, as the relay's PKI gives
// machines clientAuth only.
func role(leaf *x509.Certificate) string {
	if leaf == nil {
		return ""
	}
	if _, err := RelayName(leaf); err == nil {
		return "server "
	}
	var client, server bool
	for _, u := range leaf.ExtKeyUsage {
		client = client || u == x509.ExtKeyUsageClientAuth
		server = server || u == x509.ExtKeyUsageServerAuth
	}
	switch {
	case client && !server:
		return "client "
	case server && !client:
		return "server "
	}
	return "peer "
}

func names(leaf *x509.Certificate) string {
	if leaf == nil {
		return ""
	}
	return " (subject \"" + leaf.Subject.String() + "\", issuer \"" + leaf.Issuer.String() + "\")"
}

func validity(leaf *x509.Certificate, expired bool) string {
	if leaf == nil {
		return ""
	}
	if expired {
		return " on " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	return ": valid from " + leaf.NotBefore.UTC().Format(time.RFC3339)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// SerialHex is how BetCode writes a certificate's serial number in the
// store and the audit log: lower-case hexadecimal without leading zeros.
func SerialHex(cert *x509.Certificate) string {
	if cert == nil || cert.SerialNumber == nil {
		return ""
	}
	return cert.SerialNumber.Text(16)
}
