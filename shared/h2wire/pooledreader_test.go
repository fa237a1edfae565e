package h2wire

import (
	"bytes"
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
			p := &PooledReader{R: tc.r(), Pool: NewReaderPool(64 << 10)}
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
			p.Release()
		})
	}
	t.Run("an error is not kept", func(t *testing.T) {
		// A read deadline that woke the reader (a timeout), then more
		// bytes once the deadline moved: they are read.
		r := &errThenData{}
		p := &PooledReader{R: r, Pool: NewReaderPool(64 << 10)}
		b := make([]byte, 16)
		if _, err := p.Read(b); !errors.Is(err, errTimeout) {
			t.Fatalf("first read: %v, want the timeout", err)
		}
		n, err := p.Read(b)
		if err != nil || string(b[:n]) != "after" {
			t.Fatalf("read after the timeout: %q, %v", b[:n], err)
		}
	})
	t.Run("an idle wait holds no large buffer", func(t *testing.T) {
		// A burst fills the small buffer, so the large one is taken; the
		// burst ends short, so the wait after it is on the small one.
		r := &chunks{parts: [][]byte{pattern(0, 4096), pattern(4096, 100)}}
		p := &PooledReader{R: r, Pool: NewReaderPool(64 << 10)}
		b := make([]byte, 8192)
		total := 0
		for i := 0; total < 4196; i++ {
			n, err := p.Read(b)
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if i == 1 && !p.HoldsLarge() { // the read after the one that filled the small buffer
				t.Fatal("a burst that filled the small buffer did not take the large one")
			}
		}
		if _, err := p.Read(b); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the connection's end: %v", err)
		}
		if p.HoldsLarge() {
			t.Error("the wait after a short read held the large buffer")
		}
	})
}

var errTimeout = errors.New("i/o timeout")

// errThenData fails its first Read with errTimeout, then returns "after".
type errThenData struct{ n int }

func (r *errThenData) Read(p []byte) (int, error) {
	r.n++
	if r.n == 1 {
		return 0, errTimeout
	}
	return copy(p, "after"), nil
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

// pattern returns n bytes of a repeating pattern starting at offset off.
func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off + i) % 251)
	}
	return b
}
