package h2wire

import (
	"io"
	"sync"
)

// IdleReadBuf is what a PooledReader waits on when nothing is buffered.
const IdleReadBuf = 512

// ReaderPool recycles the read buffers of PooledReaders of one size.
type ReaderPool struct {
	pool sync.Pool
}

// NewReaderPool returns a pool of size-byte read buffers.
func NewReaderPool(size int) *ReaderPool {
	p := &ReaderPool{}
	p.pool.New = func() any { b := make([]byte, size); return &b }
	return p
}

// PooledReader is a connection's read buffer, held only while it holds
// bytes. It waits for the peer with a small buffer of its own
// (IdleReadBuf); a read that fills it (more is likely waiting) takes a
// large one from Pool for the reads that follow, which goes back once it
// has been read empty after a read that did not fill it. So an idle
// connection (a tunnel, a client between calls) holds 512 bytes for its
// reader instead of the large buffer. One goroutine (the connection's
// reader) uses it.
type PooledReader struct {
	R     io.Reader // the connection
	Pool  *ReaderPool
	small [IdleReadBuf]byte
	big   *[]byte
	buf   []byte // buf[off:end] is buffered
	off   int
	end   int
	full  bool // the last fill filled buf
	err   error
}

// Read reads buffered bytes, filling the buffer first if it is empty. An
// error of the connection is returned once, after the bytes read with it,
// and not kept (as bufio.Reader does): a read deadline that woke the
// reader does not end later reads once the deadline is moved.
func (p *PooledReader) Read(b []byte) (int, error) {
	if p.off == p.end {
		if err := p.err; err != nil {
			p.err = nil
			return 0, err
		}
		p.fill()
		if p.off == p.end {
			err := p.err
			p.err = nil
			return 0, err
		}
	}
	n := copy(b, p.buf[p.off:p.end])
	p.off += n
	return n, nil
}

// fill reads once into an empty buffer: the large one while the peer
// keeps it full, else the small one (giving the large one back).
func (p *PooledReader) fill() {
	if p.full && p.big == nil {
		p.big = p.Pool.pool.Get().(*[]byte)
	} else if !p.full && p.big != nil {
		p.Pool.pool.Put(p.big)
		p.big = nil
	}
	p.buf = p.small[:]
	if p.big != nil {
		p.buf = *p.big
	}
	p.off, p.end = 0, 0
	for p.end == 0 && p.err == nil {
		p.end, p.err = p.R.Read(p.buf)
	}
	p.full = p.end == len(p.buf)
}

// Buffered returns the bytes readable without blocking.
func (p *PooledReader) Buffered() int { return p.end - p.off }

// Peek returns the next n buffered bytes without reading them; it never
// blocks, and returns fewer if fewer are buffered.
func (p *PooledReader) Peek(n int) []byte {
	return p.buf[p.off:min(p.off+n, p.end)]
}

// HoldsLarge reports whether the reader holds a buffer from its pool.
func (p *PooledReader) HoldsLarge() bool { return p.big != nil }

// Release gives the large buffer back; call it once the connection has
// ended (later reads return only what is left of the small buffer's
// bytes, then the connection's error).
func (p *PooledReader) Release() {
	if p.big != nil {
		p.Pool.pool.Put(p.big)
		p.big, p.buf, p.off, p.end = nil, nil, 0, 0
	}
}
