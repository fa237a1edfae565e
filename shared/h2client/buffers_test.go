package h2client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestPooledReader: whatever the chunks the connection delivers and the
// sizes asked for, the reader returns every byte in order and then the
// connection's error; it waits on its small buffer after a short read and
// holds the large one only while reads come back full.
func TestPooledReader(t *testing.T) {
	data := pattern(0, 300<<10)
	tests := []struct {
		name string
		r    func() io.Reader
		ask  int
	}{
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) }, 9},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }, 16 << 10},
		{"whole", func() io.Reader { return bytes.NewReader(data) }, 100 << 10},
		{"data with the error", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }, 1000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &pooledReader{r: tc.r()}
			var got bytes.Buffer
			buf := make([]byte, tc.ask)
			for {
				n, err := p.Read(buf)
				got.Write(buf[:n])
				if p.Buffered() < 0 || len(p.Peek(9)) > p.Buffered() {
					t.Fatalf("Buffered %d, Peek(9) %d bytes", p.Buffered(), len(p.Peek(9)))
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("read %d bytes, not the %d sent", got.Len(), len(data))
			}
			if _, err := p.Read(buf); err != io.EOF {
				t.Fatalf("a read after the end: %v, want EOF", err)
			}
			p.release()
		})
	}
	t.Run("an idle wait holds no large buffer", func(t *testing.T) {
		// A burst fills the small buffer, so the large one is taken; the
		// burst ends short, so the wait after it is on the small one.
		r := &chunks{parts: [][]byte{pattern(0, 4096), pattern(4096, 100)}}
		p := &pooledReader{r: r}
		b := make([]byte, 8192)
		total := 0
		for i := 0; total < 4196; i++ {
			n, err := p.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if i == 1 && p.big == nil { // the read after the one that filled the small buffer
				t.Fatal("a burst that filled the small buffer did not take the large one")
			}
		}
		if _, err := p.Read(b); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the connection's end: %v", err)
		}
		if p.big != nil {
			t.Error("the wait after a short read held the large buffer")
		}
	})
}

// chunks delivers parts one Read each (at most len(p) of a part), then
// io.ErrUnexpectedEOF.
type chunks struct{ parts [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// TestIdleConnectionsHoldNoBuffers: a connection that carried calls and is
// now idle (a tunnel whose machine was called once) holds neither its
// 64 KiB read buffer nor its 64 KiB write buffer.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	checkGoroutines(t)
	addr := startAnswering(t, frame(pattern(0, 10000)), true)
	const n = 8 // startRaw takes up to 10 connections
	before := liveHeap()
	for range n {
		cc, _ := dial(t, addr, Options{})
		resp, err := cc.RoundTrip(grpcReq(context.Background(), addr, "/t/Once", newBufBody(frame([]byte("a call")))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	per := float64(liveHeap()-before) / n / 1024
	t.Logf("heap per idle connection after a call: %.1f KiB", per)
	if per > 48 {
		t.Errorf("each idle connection holds %.1f KiB of heap, want at most 48 (no read or write buffer while idle)", per)
	}
}
