package webapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
)

// Buffer sizes of an upgraded WebSocket connection. net/http hands a
// hijacked connection its own 4 KiB reader and 4 KiB writer, which the
// WebSocket library would keep for the socket's life: 8 KiB per idle
// browser. Client messages are small (pongs, the app's pings, answers; a
// larger one is read in several reads), and a server message longer than
// the write buffer (most text deltas are not) goes out in two writes
// instead of one: cheap next to what a thousand idle sockets save.
const (
	wsReadBuffer  = 256
	wsWriteBuffer = 512
)

// smallBuffers is the ResponseWriter the WebSocket is accepted through: its
// Hijack hands the library buffers of wsReadBuffer and wsWriteBuffer bytes
// instead of net/http's, which are then freed with the connection's state
// once the handler returns (serveWS does not wait for the socket).
type smallBuffers struct {
	http.ResponseWriter
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w smallBuffers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker.
func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// net/http has written the response (the 101) before hijacking, so
	// its writer holds nothing; its reader may hold what the client sent
	// after the upgrade request without waiting for the answer.
	n := brw.Reader.Buffered()
	if n > wsReadBuffer {
		return conn, brw, nil // rare: keep net/http's buffers
	}
	var r io.Reader = conn
	if n > 0 {
		b, _ := brw.Reader.Peek(n)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)
	}
	br := bufio.NewReaderSize(r, wsReadBuffer)
	if n > 0 {
		// Into br's buffer, where the library looks for bytes read
		// ahead (it resets the reader onto the connection): the bytes
		// are there already, so this does not read from conn.
		if _, err := br.Peek(n); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	return conn, bufio.NewReadWriter(br, bufio.NewWriterSize(conn, wsWriteBuffer)), nil
}
