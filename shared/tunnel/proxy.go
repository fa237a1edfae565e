package tunnel

import (
	"context"
	"net/http"
)

// ProxyCall forwards one gRPC call, byte for byte, to https://host over rt
// (an HTTP/2 transport, which carries every call to host on one
// connection): the client's headers (hop-by-hop ones and its credentials
// dropped) plus headers, the request body as it arrives, then the answer's
// headers, body chunks (flushed when nothing more is waiting) and trailers
// back to w. The relay uses it to hand a call to the replica that holds the
// machine's tunnel. It returns when the call is over.
//
// If the request could not be sent (rt.RoundTrip failed: the peer is
// unreachable, or went away before answering) and unreached is set and
// returns true for the error, nothing has been written to w and the caller
// has answered the call. Other failures are answered as on a tunnel:
// DEADLINE_EXCEEDED, CANCELLED or UNAVAILABLE.
func ProxyCall(parent context.Context, rt http.RoundTripper, host string, w http.ResponseWriter, r *http.Request, headers http.Header, unreached func(error) bool) error {
	return forwardH2(parent, rt, "https", host, w, r, headers, unreached)
}
