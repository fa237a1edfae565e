package tunnel

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/shared/conntest"
)

// TestHostileAgentDirectConnection: an agent is its owner's program, so a
// hostile user can make theirs answer the calls they send it with frames
// meant to hurt the relay, which serves everyone. Over a direct connection
// each such answer must fail that call with an error, cost the relay a
// bounded amount of reading (the response header limit, maxAgentHeaderBytes),
// and leave the tunnel working: the next call is answered.
func TestHostileAgentDirectConnection(t *testing.T) {
	bothDirectClients(t, testHostileAgentDirectConnection)
}

func testHostileAgentDirectConnection(t *testing.T) {
	tests := []struct {
		name string
		// answer writes the hostile answer to the call on stream id; sent
		// counts the header or garbage bytes written.
		answer func(c net.Conn, fr *http2.Framer, id uint32, sent *atomic.Int64) error
	}{
		{"response headers that never end", func(_ net.Conn, fr *http2.Framer, id uint32, sent *atomic.Int64) error {
			junk := hpackFields(hpack.HeaderField{Name: "x-junk", Value: strings.Repeat("a", 8000)})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hpackFields(hpack.HeaderField{Name: ":status", Value: "200"})}); err != nil {
				return err
			}
			for sent.Load() < 256<<20 {
				if err := fr.WriteContinuation(id, false, junk); err != nil {
					return err
				}
				sent.Add(int64(len(junk)))
			}
			return nil
		}},
		{"an HPACK bomb in the response headers", func(_ net.Conn, fr *http2.Framer, id uint32, sent *atomic.Int64) error {
			// A 4 KiB value put in the dynamic table, then named by index
			// 40,000 times: 40 KiB on the wire that decode to 160 MiB.
			var buf bytes.Buffer
			enc := hpack.NewEncoder(&buf)
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
			enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)})
			for range 40_000 {
				buf.WriteByte(0x80 | 62) // the newest dynamic table entry: the bomb
			}
			block := buf.Bytes()
			sent.Add(int64(len(block)))
			for first := true; len(block) > 0; first = false {
				n := min(len(block), 16<<10)
				var err error
				if first {
					err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:n], EndHeaders: n == len(block)})
				} else {
					err = fr.WriteContinuation(id, n == len(block), block[:n])
				}
				if err != nil {
					return err
				}
				block = block[n:]
			}
			return nil
		}},
		{"garbage instead of frames", func(c net.Conn, _ *http2.Framer, _ uint32, sent *atomic.Int64) error {
			junk := make([]byte, 64<<10)
			rand.Read(junk)
			for sent.Load() < 256<<20 {
				if _, err := c.Write(junk); err != nil {
					return err
				}
				sent.Add(int64(len(junk)))
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newDirectWorld(t)
			relayEnd, agentEnd := conntest.TCPPair(t)
			var sent atomic.Int64
			served := make(chan error, 1)
			go func() { served <- serveHostile(agentEnd, tc.answer, &sent) }()
			token := make([]byte, DirectTokenLen)
			rand.Read(token)
			w.client.mu.Lock()
			w.client.token = token // as if offered
			w.client.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			read := &countingConn{Conn: relayEnd}
			if err := w.client.AttachDirect(ctx, read, token); err != nil {
				t.Fatal(err)
			}
			req, _ := proto.Marshal(&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hi")}})
			res, err := w.client.Invoke(ctx, "r", "grpc.testing.TestService", "UnaryCall", nil, req)
			if ctx.Err() != nil {
				t.Fatalf("the call waited out its deadline: %v", err)
			}
			if err == nil && res.Code == 0 {
				t.Fatalf("the hostile answer was taken as a success: %+v", res)
			}
			t.Logf("the call failed with %v %+v", err, res)
			agentEnd.Close()
			serr := <-served
			t.Logf("the hostile agent wrote %d KiB (socket buffers take much of it), the relay read %d KiB; then: %v", sent.Load()>>10, read.n.Load()>>10, serr)
			if limit := int64(4*maxAgentHeaderBytes + 64<<10); read.n.Load() > limit {
				t.Errorf("the relay read %d KiB of one hostile answer; want at most %d KiB", read.n.Load()>>10, limit>>10)
			}
			w.call(t, "after") // the tunnel still carries calls
		})
	}
}

// longErrorMessage is 16 KiB of UTF-8 that grpc-message percent-encodes
// to 48 KiB.
var longErrorMessage = strings.Repeat("é", 8<<10)

// TestLongAgentErrorArrives: the limit on an agent's answer headers
// (maxAgentHeaderBytes) leaves room for the longest error BetCode's agent
// sends, message and details.
func TestLongAgentErrorArrives(t *testing.T) { bothDirectClients(t, testLongAgentErrorArrives) }

func testLongAgentErrorArrives(t *testing.T) {
	w := newDirectWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := proto.Marshal(&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("long error")}})
	res, err := w.client.Invoke(ctx, "r", "grpc.testing.TestService", "UnaryCall", nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 9 || res.Message != longErrorMessage { // FAILED_PRECONDITION
		t.Fatalf("code %d, message of %d bytes; want 9 and the %d-byte message", res.Code, len(res.Message), len(longErrorMessage))
	}
}

// countingConn counts the bytes read from it.
type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// serveHostile is an agent's end of a direct connection that speaks
// HTTP/2 until the first call, and answers it with answer. Writes that the
// relay blocks for 20 s fail.
func serveHostile(c net.Conn, answer func(net.Conn, *http2.Framer, uint32, *atomic.Int64) error, sent *atomic.Int64) error {
	c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.MetaHeadersFrame:
			// Keep reading (the request's DATA, the relay's pings) while
			// answering, as a real server would.
			go io.Copy(io.Discard, c)
			return answer(c, fr, f.StreamID, sent)
		}
	}
}

// hpackFields encodes fields with a fresh encoder.
func hpackFields(fields ...hpack.HeaderField) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range fields {
		enc.WriteField(f)
	}
	return buf.Bytes()
}
