package h2client

import (
	"io"
	"sync"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// A connection's read and write buffers (bufSize each) are held only
// while they hold bytes: an idle connection (a tunnel whose machine was
// called once and then left alone, as most are) holds 512 bytes for its
// reader instead of 128 KiB.

// writeBufs recycles the connections' write buffers (h2wire.PooledWriter).
var writeBufs = h2wire.NewWriterPool(bufSize)

// idleReadBuf is what the reader waits on when nothing is buffered.
const idleReadBuf = 512

var readBufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// pooledReader is the connection's read buffer. It waits for the peer with
// a small buffer of its own; a read that fills it (more is likely waiting)
// takes a bufSize one from a pool for the reads that follow, which goes
// back once it has been read empty after a read that did not fill it. One
// goroutine (the connection's reader) uses it.
type pooledReader struct {
	r     io.Reader
	small [idleReadBuf]byte
	big   *[]byte
	buf   []byte // buf[off:end] is buffered
	off   int
	end   int
	full  bool // the last fill filled buf
	err   error
}

// Read reads buffered bytes, filling the buffer first if it is empty.
func (p *pooledReader) Read(b []byte) (int, error) {
	if p.off == p.end {
		if p.err != nil {
			return 0, p.err
		}
		p.fill()
		if p.off == p.end {
			return 0, p.err
		}
	}
	n := copy(b, p.buf[p.off:p.end])
	p.off += n
	return n, nil
}

// fill reads once into an empty buffer: the large one while the peer
// keeps it full, else the small one (giving the large one back).
func (p *pooledReader) fill() {
	if p.full && p.big == nil {
		p.big = readBufs.Get().(*[]byte)
	} else if !p.full && p.big != nil {
		readBufs.Put(p.big)
		p.big = nil
	}
	p.buf = p.small[:]
	if p.big != nil {
		p.buf = *p.big
	}
	p.off, p.end = 0, 0
	for p.end == 0 && p.err == nil {
		p.end, p.err = p.r.Read(p.buf)
	}
	p.full = p.end == len(p.buf)
}

// Buffered returns the bytes readable without blocking.
func (p *pooledReader) Buffered() int { return p.end - p.off }

// Peek returns the next n buffered bytes without reading them; it never
// blocks, and returns fewer if fewer are buffered.
func (p *pooledReader) Peek(n int) []byte {
	return p.buf[p.off:min(p.off+n, p.end)]
}

// release gives the large buffer back once the connection has ended.
func (p *pooledReader) release() {
	if p.big != nil {
		readBufs.Put(p.big)
		p.big, p.buf, p.off, p.end = nil, nil, 0, 0
	}
}
