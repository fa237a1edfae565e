package h2wire

import (
	"bufio"
	"io"
	"sync"
)

// WriterPool recycles the write buffers of PooledWriters of one size.
type WriterPool struct {
	pool sync.Pool
}

// NewWriterPool returns a pool of size-byte write buffers.
func NewWriterPool(size int) *WriterPool {
	p := &WriterPool{}
	p.pool.New = func() any { return bufio.NewWriterSize(nil, size) }
	return p
}

// PooledWriter is a connection's write buffer, taken from Pool while it
// holds bytes and given back once they are flushed, as x/net's HTTP/2
// server does: an idle connection holds no write buffer. It is not safe
// for concurrent use; a connection guards it with its write lock.
type PooledWriter struct {
	W    io.Writer // the connection
	Pool *WriterPool
	bw   *bufio.Writer
}

// Write buffers b.
func (p *PooledWriter) Write(b []byte) (int, error) {
	if p.bw == nil {
		p.bw = p.Pool.pool.Get().(*bufio.Writer)
		p.bw.Reset(p.W)
	}
	return p.bw.Write(b)
}

// Buffered returns the bytes waiting for Flush.
func (p *PooledWriter) Buffered() int {
	if p.bw == nil {
		return 0
	}
	return p.bw.Buffered()
}

// Flush writes what is buffered and gives the buffer back. After an error
// the buffer stays (the connection is failing).
func (p *PooledWriter) Flush() error {
	if p.bw == nil {
		return nil
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	p.bw.Reset(nil)
	p.Pool.pool.Put(p.bw)
	p.bw = nil
	return nil
}
