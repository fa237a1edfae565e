package tunnel

import (
	"net/http"
	"testing"
)

// The client's own metadata reaches the agent unchanged (the agent reads
// x-betcode-client-version, x-betcode-client-id, ...); only hop-by-hop
// headers and the relay's credentials are dropped, and the relay's own
// headers win.
func TestCallHeadersKeepClientMetadata(t *testing.T) {
	r := &http.Request{Header: http.Header{
		"X-Betcode-Client-Version": {"0.2.0"}, "X-Betcode-Client-Id": {"c1"},
		"Authorization": {"Bearer bct_x"}, "Connection": {"close"}, "X-Betcode-Machine-Id": {"spoofed"},
	}}
	md := callHeaders(r, http.Header{"x-betcode-machine-id": {"m1"}})
	for k, want := range map[string]string{"X-Betcode-Client-Version": "0.2.0", "X-Betcode-Client-Id": "c1", "X-Betcode-Machine-Id": "m1", "Authorization": "", "Connection": ""} {
		if got := md.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
