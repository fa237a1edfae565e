package h2client

import "github.com/betcode-dev/betcode/shared/h2wire"

// A connection's read and write buffers (bufSize each) are held only
// while they hold bytes: an idle connection (a tunnel whose machine was
// called once and then left alone, as most are) holds 512 bytes for its
// reader instead of 128 KiB.

// writeBufs recycles the connections' write buffers (h2wire.PooledWriter).
var writeBufs = h2wire.NewWriterPool(bufSize)

// readBufs recycles the connections' large read buffers
// (h2wire.PooledReader).
var readBufs = h2wire.NewReaderPool(bufSize)
