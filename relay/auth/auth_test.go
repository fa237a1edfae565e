package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMiddlewareTrustsForwardingOnlyFromRelays: the forwarding headers
// name the user only on a connection with a verified relay certificate;
// anyone else's are dropped, and such a call without a token is refused.
func TestMiddlewareTrustsForwardingOnlyFromRelays(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, []string{"localhost"}, pki.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueMachine(dir, "m1", pki.Options{}); err != nil {
		t.Fatal(err)
	}
	relay := readCert(t, filepath.Join(dir, pki.RelayCertFile))
	machine := readCert(t, filepath.Join(dir, pki.MachineCertFile("m1")))
	verified := func(c *x509.Certificate) *tls.ConnectionState {
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	st := openStore(t)
	a := New(st, Options{})
	good := storetest.UserToken(t, st, "bob")
	forwarded := http.Header{ForwardedByHeader: {"10.0.0.1:8443"}, UserHeader: {"alice"}}
	withToken := http.Header{ForwardedByHeader: {"10.0.0.1:8443"}, UserHeader: {"alice"}, "Authorization": {"Bearer " + good}}
	tests := []struct {
		name    string
		tls     *tls.ConnectionState
		headers http.Header
		want    Identity // zero: refused UNAUTHENTICATED
		kept    bool     // the forwarding headers reach the handler
	}{
		{"relay certificate", verified(relay), forwarded, Identity{UserID: "alice", ForwardedBy: "10.0.0.1:8443"}, true},
		{"relay certificate, no headers", verified(relay), http.Header{}, Identity{}, false},
		{"relay certificate, no user", verified(relay), http.Header{ForwardedByHeader: {"x"}}, Identity{}, false},
		{"no TLS state", nil, forwarded, Identity{}, false},
		{"TLS without client certificate", &tls.ConnectionState{}, forwarded, Identity{}, false},
		{"machine certificate", verified(machine), forwarded, Identity{}, false},
		{"relay certificate presented but not verified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{relay}}, forwarded, Identity{}, false},
		{"client token with forged headers", &tls.ConnectionState{}, withToken, Identity{UserID: "bob", TokenID: tokenID(good)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Identity
			var gotHeaders http.Header
			h := a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, _ = FromContext(r.Context())
				gotHeaders = r.Header
			}))
			r := httptest.NewRequest(http.MethodPost, "/betcode.v1.AgentService/ListSessions", nil)
			r.TLS = tt.tls
			for k, v := range tt.headers {
				r.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			got.Remote = ""
			if got != tt.want {
				t.Errorf("identity = %+v; want %+v", got, tt.want)
			}
			if tt.want.UserID == "" && rec.Header().Get("Grpc-Status") != "16" {
				t.Errorf("refused call answered grpc-status %q; want 16", rec.Header().Get("Grpc-Status"))
			}
			if gotHeaders != nil {
				if kept := gotHeaders.Get(ForwardedByHeader) != "" || gotHeaders.Get(UserHeader) != ""; kept != tt.kept {
					t.Errorf("forwarding headers kept = %v; want %v (%v)", kept, tt.kept, gotHeaders)
				}
				if gotHeaders.Get("Authorization") != "" {
					t.Error("the token was passed on to the handler (and so to a machine)")
				}
			}
		})
	}
}
