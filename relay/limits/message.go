package limits

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/h2client"
)

// ErrMessageTooLarge: a request message is larger than the limit. The
// relay answers RESOURCE_EXHAUSTED (WriteExhausted with
// CodeMessageTooLarge), as grpc-go does for a message over its limit.
var ErrMessageTooLarge = errors.New("request message too large")

// grpcHeaderLen is the length of gRPC's message prefix: a compression flag
// and a big-endian uint32 length.
const grpcHeaderLen = 5

// MessageReader passes a gRPC request body through unchanged, reading the
// 5-byte prefix of each message as it goes by, and fails as soon as one
// announces a message larger than its limit: the message itself is never
// read, let alone buffered. Use it as the request body of a forwarded
// call, cancelling the call when it trips (tunnel.Forward and ProxyCall
// then write nothing) and answering it once the forwarding has returned:
//
//	ctx, cancel := context.WithCancelCause(r.Context())
//	defer cancel(nil)
//	body := limits.MessageLimitReader(r.Body, cfg.MaxMessageBytes)
//	body.OnTooLarge = cancel // called before Read returns the error
//	r.Body = body
//	tw := limits.TrackHeaders(w) // the call may be under way when it trips
//	... forward r to tw with ctx ...
//	if err := context.Cause(ctx); errors.Is(err, limits.ErrMessageTooLarge) {
//		limits.WriteExhausted(tw, limits.CodeMessageTooLarge, err.Error())
//	}
//
// A MessageReader is for one goroutine, like the body it wraps.
type MessageReader struct {
	// OnTooLarge, if set, is called once, by the goroutine reading, with
	// the error Read returns (errors.Is ErrMessageTooLarge) when a
	// message over the limit is announced.
	OnTooLarge func(error)

	r    io.Reader
	max  uint64
	hdr  [grpcHeaderLen]byte
	nhdr int    // bytes of the current message's prefix seen so far
	left uint64 // bytes of the current message still to pass
	err  error  // sticky: the limit was exceeded
}

// MessageLimitReader returns a reader of r's gRPC messages that fails with
// ErrMessageTooLarge when one is announced larger than limit bytes (a
// negative limit counts as 0). Its Close closes r if r is an io.Closer.
func MessageLimitReader(r io.Reader, limit int) *MessageReader {
	return &MessageReader{r: r, max: uint64(max(limit, 0))}
}

// Buffered passes on what the wrapped body can say without blocking
// (n bytes readable now; ended: nothing follows them), so that a whole
// request can be sent on at once. After the limit tripped it says nothing.
func (m *MessageReader) Buffered() (n int, ended bool) {
	if bb, ok := m.r.(h2client.Buffered); ok && m.err == nil {
		return bb.Buffered()
	}
	return 0, false
}

// Notify passes the wrapped body's callback on (callpark.Notifier), so
// that the tunnel need not wait in Read; after the limit tripped a Read
// does not block, and it reports false.
func (m *MessageReader) Notify(f func()) bool {
	return m.err == nil && callpark.NotifyVia(m.r, f)
}

// Read reads from the body. When a message prefix announces more than the
// limit it returns the bytes before that prefix (parts of the prefix that
// arrived in an earlier Read have been passed on) and an error that
// errors.Is ErrMessageTooLarge; every later Read returns the same error.
func (m *MessageReader) Read(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n, err := m.r.Read(p)
	if k, tooLarge := m.scan(p[:n]); tooLarge != nil {
		m.err = tooLarge
		if m.OnTooLarge != nil {
			m.OnTooLarge(tooLarge)
		}
		return k, tooLarge
	}
	return n, err
}

// scan follows the message boundaries through b. If a prefix announces
// too large a message it returns the offset in b where that prefix began
// (0 if it began in an earlier read) and the error.
func (m *MessageReader) scan(b []byte) (int, error) {
	for i := 0; i < len(b); {
		if m.left > 0 {
			skip := min(uint64(len(b)-i), m.left)
			m.left -= skip
			i += int(skip)
			continue
		}
		start := max(i-m.nhdr, 0)
		k := copy(m.hdr[m.nhdr:], b[i:])
		m.nhdr += k
		i += k
		if m.nhdr < grpcHeaderLen {
			break
		}
		m.nhdr = 0
		size := uint64(binary.BigEndian.Uint32(m.hdr[1:]))
		if size > m.max {
			return start, fmt.Errorf("%w: %d bytes, the limit is %d", ErrMessageTooLarge, size, m.max)
		}
		m.left = size
	}
	return len(b), nil
}

// Close closes the underlying reader if it is an io.Closer.
func (m *MessageReader) Close() error {
	if c, ok := m.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

var _ io.ReadCloser = (*MessageReader)(nil)
