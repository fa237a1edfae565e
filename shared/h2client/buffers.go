package h2client

import (
	"bufio"
	"io"
	"sync"
)

// A connection's read and write buffers (bufSize each) are held only
// while they hold bytes: an idle connection (a tunnel whose machine was
// called once and then left alone, as most are) holds 512 bytes for its
// reader instead of 128 KiB.

// pooledWriter is a bufio.Writer taken from a pool while it holds bytes
// and given back once they are flushed, as x/net's HTTP/2 server does.
type pooledWriter struct {
	w  io.Writer
	bw *bufio.Writer
}

var writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}

// Write buffers b.
func (p *pooledWriter) Write(b []byte) (int, error) {
	if p.bw == nil {
		p.bw = writeBufs.Get().(*bufio.Writer)
		p.bw.Reset(p.w)
	}
	return p.bw.Write(b)
}

// Buffered returns the bytes waiting for Flush.
func (p *pooledWriter) Buffered() int {
	if p.bw == nil {
		return 0
	}
	return p.bw.Buffered()
}

// Flush writes what is buffered and gives the buffer back. After an error
// the buffer stays (the connection is failing).
func (p *pooledWriter) Flush() error {
	if p.bw == nil {
		return nil
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	p.bw.Reset(nil)
	writeBufs.Put(p.bw)
	p.bw = nil
	return nil
}

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
