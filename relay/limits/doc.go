// Package limits bounds what one caller can take from the relay, so that it
// can be hosted on the internet: calls per second per token, concurrent calls
// per token and per machine tunnel, the size of one request message, and
// connections that have not finished their TLS handshake.
//
// A Limiter holds the per-token and per-tunnel state; MessageLimitReader
// enforces the message size on a request body without decoding or buffering
// it; WriteRateLimited and WriteExhausted answer a refused call the way the
// API specifies (RESOURCE_EXHAUSTED with a BetCode ErrorInfo detail). The
// package decides nothing about who the caller is: the relay's middleware
// passes the authenticated token id and the machine id.
package limits
