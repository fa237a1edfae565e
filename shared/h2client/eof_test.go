package h2client

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// A server that closes the connection in the middle of an answer fails
// the call: the body's Read returns an error that is not, and does not
// wrap, io.EOF, so that a copy loop never takes the connection's end for
// the end of the answer.
func TestConnectionClosedMidAnswerIsNotEOF(t *testing.T) {
	leakcheck.Goroutines(t)
	addr := startRaw(t, func(rc *rawConn) {
		h := rc.nextHeaders()
		if h == nil {
			return
		}
		rc.writeHeaders(h.StreamID, false, ":status", "200", "content-type", "application/grpc")
		rc.fr.WriteData(h.StreamID, false, frame([]byte("part")))
		rc.c.Close()
	})
	cc, _ := dial(t, addr, Options{})
	resp, err := cc.RoundTrip(simpleReq(context.Background(), addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read %q, then %v; want a failure that is not io.EOF", b, err)
	}
	t.Logf("read %d bytes, then: %v", len(b), err)
}
