package push

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestRelayClientRefusesPrivateAddresses: whatever a name resolves to, the
// relayed sends' client connects only to public addresses.
func TestRelayClientRefusesPrivateAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	_, err := newRelayClient(5*time.Second, false).Get("http://localhost" + port + "/")
	if !errors.Is(err, errPrivateAddress) {
		t.Fatalf("GET on localhost: %v, want %v", err, errPrivateAddress)
	}
	resp, err := newRelayClient(5*time.Second, true).Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	resp.Body.Close()
}

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"142.250.1.1": true, "2a00:1450::1": true, "10.0.0.1": false, "172.16.0.1": false, "192.168.0.1": false,
		"127.0.0.1": false, "::1": false, "169.254.169.254": false, "100.64.0.1": false, "fd00::1": false,
		"fe80::1": false, "0.0.0.0": false, "::ffff:10.0.0.1": false, "224.0.0.1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}
