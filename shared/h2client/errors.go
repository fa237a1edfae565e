package h2client

import (
	"errors"
	"fmt"

	"golang.org/x/net/http2"
)

// StreamError is the error of a call whose stream was reset.
type StreamError struct {
	// StreamID is the HTTP/2 stream identifier.
	StreamID uint32
	// Code is the RST_STREAM error code.
	Code http2.ErrCode
	// Remote reports that the peer sent the RST_STREAM; otherwise this side
	// reset the stream (for example on a flow-control violation).
	Remote bool
}

// Error describes the reset, e.g. "stream 5 reset by the peer: CANCEL".
func (e *StreamError) Error() string {
	if e.Remote {
		return fmt.Sprintf("stream %d reset by the peer: %v", e.StreamID, e.Code)
	}
	return fmt.Sprintf("stream %d reset: %v", e.StreamID, e.Code)
}

var (
	errClosed     = errors.New("h2client: connection closed")
	errBodyClosed = errors.New("h2client: response body closed")
	errNoURL      = errors.New("h2client: request has no URL")
	errIDsSpent   = errors.New("h2client: stream identifiers exhausted")
)

// goAwayRefusedError fails a call whose stream the server did not process
// before going away (its id is above the GOAWAY's last-stream-id). It is
// safe to retry the request on another connection.
type goAwayRefusedError struct {
	id, last uint32
}

func (e *goAwayRefusedError) Error() string {
	return fmt.Sprintf("h2client: stream %d not processed: server sent GOAWAY with last stream %d (retryable)", e.id, e.last)
}

// connError is a connection error found while handling a frame: the reader
// answers it with a GOAWAY carrying code, then closes the connection.
type connError struct {
	code http2.ErrCode
	err  error
}

func (e *connError) Error() string { return fmt.Sprintf("%v: %v", e.code, e.err) }

func (e *connError) Unwrap() error { return e.err }
