// Package h2client is a lean, frame-level HTTP/2 client connection for
// calls the relay forwards to an agent over the agent's direct connection:
// a connection the agent dialed, on which the relay is the HTTP/2 client and
// the agent runs a grpc-go server.
//
// A Conn is built on golang.org/x/net/http2's Framer and hpack. It runs one
// reader goroutine per connection; every write is done by the goroutine that
// needs it, under a write mutex, into one bufio.Writer, and flushed as rarely
// as possible: a request whose body is already available (see Buffered)
// leaves in a single write(2) as HEADERS + DATA + END_STREAM, and a burst of
// control frames the reader owes the peer (SETTINGS and PING acks, window
// updates) is flushed once, when the reader runs out of buffered input.
//
// RoundTrip mirrors net/http's HTTP/2 client where practical: responses carry
// Trailer (filled before Body.Read returns io.EOF), resets surface as
// *StreamError, and the request context cancels the stream.
package h2client
