package limits

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// frame returns a gRPC message prefix announcing n bytes, then body.
func frame(n uint32, body []byte) []byte {
	b := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(b[1:], n)
	return append(b, body...)
}

func concat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestMessageLimitReader(t *testing.T) {
	small, exact := bytes.Repeat([]byte("a"), 10), bytes.Repeat([]byte("b"), 64)
	tests := []struct {
		name    string
		body    []byte
		max     int
		wantOut []byte // what passes before the error (all of body when none)
		wantErr bool
	}{
		{"empty body", nil, 64, nil, false},
		{"one small message", frame(10, small), 64, nil, false},
		{"a message of exactly the limit", frame(64, exact), 64, nil, false},
		{"empty messages", concat(frame(0, nil), frame(0, nil)), 0, nil, false},
		{"several messages", concat(frame(10, small), frame(64, exact), frame(10, small)), 64, nil, false},
		{"one byte over", frame(65, nil), 64, nil, true},
		{"too large after good ones", concat(frame(10, small), frame(64, exact), frame(1<<31, nil)), 64, concat(frame(10, small), frame(64, exact)), true},
		{"the largest length", frame(0xffffffff, nil), 16 << 20, nil, true},
		{"compressed flag counts the same", concat([]byte{1, 0, 0, 1, 0}), 64, nil, true},
		{"a truncated prefix is no error here", []byte{0, 0, 0}, 64, nil, false},
		{"a truncated message is no error here", frame(10, small[:3]), 64, nil, false},
		{"negative limit is zero", concat(frame(0, nil), frame(1, []byte("x"))), -5, frame(0, nil), true},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
		{"data with EOF", iotest.DataErrReader},
	}
	for _, tc := range tests {
		for _, rd := range readers {
			t.Run(tc.name+"/"+rd.name, func(t *testing.T) {
				calls := 0
				var called error
				m := MessageLimitReader(rd.wrap(bytes.NewReader(tc.body)), tc.max)
				m.OnTooLarge = func(err error) { calls++; called = err }
				out, err := io.ReadAll(m)
				if !tc.wantErr {
					if err != nil || !bytes.Equal(out, tc.body) {
						t.Fatalf("read %d bytes, %v; want the %d bytes of the body, no error", len(out), err, len(tc.body))
					}
					if calls != 0 {
						t.Fatal("OnTooLarge was called")
					}
					return
				}
				if !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("err = %v, want ErrMessageTooLarge", err)
				}
				// Bytes of the offending prefix that arrived in an earlier
				// read may have been passed on; nothing after it.
				if !bytes.HasPrefix(out, tc.wantOut) || len(out) > len(tc.wantOut)+4 || !bytes.HasPrefix(tc.body, out) {
					t.Fatalf("passed %x, want %x (plus at most 4 bytes of the next prefix)", out, tc.wantOut)
				}
				if calls != 1 || called != err {
					t.Fatalf("OnTooLarge called %d times with %v, want once with %v", calls, called, err)
				}
				if n, again := m.Read(make([]byte, 10)); n != 0 || again != err {
					t.Fatalf("a later Read = %d, %v; want 0, the same error", n, again)
				}
			})
		}
	}
}

func TestMessageLimitReaderErrorText(t *testing.T) {
	_, err := io.ReadAll(MessageLimitReader(bytes.NewReader(frame(1000, nil)), 999))
	if want := "request message too large: 1000 bytes, the limit is 999"; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

// The message is never read: only the prefix is, however large the
// announced message.
func TestMessageLimitReaderDoesNotReadTheMessage(t *testing.T) {
	src := io.MultiReader(bytes.NewReader(frame(1<<30, nil)), iotest.ErrReader(errors.New("read past the prefix")))
	_, err := io.ReadAll(MessageLimitReader(src, 1<<20))
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("err = %v, want ErrMessageTooLarge", err)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestMessageLimitReaderClose(t *testing.T) {
	rc := &closeRecorder{Reader: strings.NewReader("")}
	if err := MessageLimitReader(rc, 1).Close(); err != nil || !rc.closed {
		t.Fatalf("Close() = %v, closed %v; want the body closed", err, rc.closed)
	}
	if err := MessageLimitReader(strings.NewReader(""), 1).Close(); err != nil {
		t.Fatalf("Close() of a reader without Close = %v", err)
	}
}

// chunkReader returns src in reads of the sizes in sizes (cycled; 0 means
// an empty read, never two in a row).
type chunkReader struct {
	src       []byte
	sizes     []byte
	i         int
	lastEmpty bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := len(c.src)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])
		c.i++
		if n == 0 && c.lastEmpty {
			n = 1
		}
		c.lastEmpty = n == 0
	}
	n = min(n, len(p), len(c.src))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

// offending returns where the first prefix announcing more than max
// begins in body, or -1.
func offending(body []byte, max uint64) int {
	for i := 0; i+5 <= len(body); {
		n := uint64(binary.BigEndian.Uint32(body[i+1 : i+5]))
		if n > max {
			return i
		}
		i += 5 + int(min(n, uint64(len(body))))
	}
	return -1
}

func FuzzMessageLimitReader(f *testing.F) {
	f.Add(frame(3, []byte("abc")), uint16(16), []byte{1})
	f.Add(concat(frame(3, []byte("abc")), frame(17, nil)), uint16(16), []byte{2, 0, 7})
	f.Add(concat(frame(0, nil), frame(16, bytes.Repeat([]byte{0xff}, 16)), frame(0xffffffff, nil)), uint16(16), []byte(nil))
	f.Add([]byte{1, 0, 0, 0}, uint16(0), []byte{3})
	f.Fuzz(func(t *testing.T, body []byte, limit uint16, sizes []byte) {
		max := int(limit)
		m := MessageLimitReader(&chunkReader{src: body, sizes: sizes}, max)
		out, err := readAllBounded(m, len(body)+1)
		bad := offending(body, uint64(max))
		if bad < 0 {
			if err != nil || !bytes.Equal(out, body) {
				t.Fatalf("no message over %d: got %d bytes and %v, want the %d bytes", max, len(out), err, len(body))
			}
			return
		}
		if !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("a prefix at %d announces more than %d: err = %v", bad, max, err)
		}
		if !bytes.HasPrefix(body, out) || len(out) < bad || len(out) > bad+4 {
			t.Fatalf("passed %d bytes; the offending prefix is at %d", len(out), bad)
		}
	})
}

// readAllBounded is io.ReadAll that fails the test's expectations rather
// than looping if the reader returns more than limit bytes or stalls.
func readAllBounded(r io.Reader, limit int) ([]byte, error) {
	var out []byte
	buf := make([]byte, 7)
	for empty := 0; empty < 1000; {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if len(out) > limit {
			return out, errors.New("read more than the body")
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if n == 0 {
			empty++
		}
	}
	return out, errors.New("reader stalled")
}
