package tunnel

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestChunkReader checks that a chunkReader returns every byte in order,
// holds the large buffer only while reads fill their buffer, and gives it
// back before it waits again.
func TestChunkReader(t *testing.T) {
	tests := []struct {
		name string
		r    func([]byte) io.Reader
	}{
		{"one read each", func(b []byte) io.Reader { return bytes.NewReader(b) }},
		{"one byte at a time", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"half reads", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	}
	for _, size := range []int{0, 10, quietChunk, quietChunk + 1, 3 * ChunkBytes / 2} {
		for _, tc := range tests {
			in := make([]byte, size)
			for i := range in {
				in[i] = byte(i * 7)
			}
			cr := newChunkReader(tc.r(in))
			var out []byte
			for {
				chunk, full, err := cr.read()
				if full != (len(chunk) == quietChunk || len(chunk) == ChunkBytes) {
					t.Fatalf("%s/%d: full=%v for a chunk of %d", tc.name, size, full, len(chunk))
				}
				if !full && len(chunk) > 0 && !cr.release && cr.big != nil {
					t.Fatalf("%s/%d: a short read keeps the large buffer", tc.name, size)
				}
				out = append(out, chunk...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			cr.close()
			if !bytes.Equal(in, out) {
				t.Fatalf("%s/%d: got %d bytes, not what was written", tc.name, size, len(out))
			}
			if cr.big != nil {
				t.Fatalf("%s/%d: large buffer kept after close", tc.name, size)
			}
		}
	}
}

// TestChunkReaderQuietHoldsSmall checks that a reader waiting on a quiet
// body waits with the small buffer.
func TestChunkReaderQuietHoldsSmall(t *testing.T) {
	pr, pw := io.Pipe()
	cr := newChunkReader(pr)
	defer cr.close()
	go func() {
		pw.Write(make([]byte, 3*quietChunk)) // fills the small buffer: the large one is taken
		pw.Write([]byte("x"))
		pw.Close()
	}()
	if c, full, _ := cr.read(); !full || len(c) != quietChunk || cr.big == nil {
		t.Fatalf("first read: %d bytes, full=%v, big=%v", len(c), full, cr.big != nil)
	}
	if c, full, _ := cr.read(); full || len(c) != 2*quietChunk {
		t.Fatalf("second read: %d bytes, full=%v", len(c), full)
	}
	// Waiting for the next write: the large buffer went back first.
	if c, _, _ := cr.read(); string(c) != "x" || cr.big != nil && !cr.release {
		t.Fatalf("third read: %q, big=%v", c, cr.big != nil)
	}
}
