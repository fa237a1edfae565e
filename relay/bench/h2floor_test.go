package bench

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// h2ModeEnv makes the test binary the "h2" floor path's middle process
// (h2Main).
const h2ModeEnv = "BETCODE_BENCH_H2_FLOOR"

// BETCODE_BENCH_H2_GOROUTINES adds, for experiments, the goroutines a
// net/http relay starts: "call" forwards each call from a goroutine of its
// own (as net/http runs each handler), "write" passes each answer frame to
// its client from a goroutine of its own, flushed there (as net/http's
// server writes its frames); "call,write" both.
// "flush" flushes each answer frame on its own, without a goroutine.
// "upflush" writes each request to the agent as net/http's HTTP/2 client
// does: HEADERS, DATA and an empty END_STREAM DATA, each flushed.
var h2CallGoroutine, h2WriteGoroutine, h2FlushEach, h2UpFlushEach bool

// h2Main is the "h2" path's middle process: about the least a hop that ends
// TLS and HTTP/2 on both sides can add to a unary call in Go. It ends the
// client's TLS and HTTP/2 and carries each call to the agent, frame by
// frame, on one HTTP/2 connection of its own: one reader goroutine per
// connection, each frame passed on by the reader that got it, written
// under the other connection's lock and flushed when that reader has
// nothing more buffered. No goroutine per call or per write, no
// authentication, no routing, no limits. Where "l4" (l4Main) is the floor
// of any extra process, this is the floor of any HTTP/2-terminating relay
// built that way; the relay's figure against it is what its design costs.
//
// Unary calls only: it grants flow-control windows as it reads and keeps
// no account of the client's, so a long stream could overrun them.
// Environment: BETCODE_BENCH_H2_TARGET (the agent's TLS address),
// BETCODE_BENCH_H2_CERT/KEY (its own certificate), BETCODE_BENCH_H2_CA (to
// verify the agent). It prints "ready ADDR" and runs until stdin closes.
func h2Main() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "h2 floor:", err)
		return 1
	}
	g := os.Getenv("BETCODE_BENCH_H2_GOROUTINES")
	on := map[string]bool{}
	for _, v := range strings.Split(g, ",") {
		on[strings.TrimSpace(v)] = true
	}
	h2CallGoroutine, h2WriteGoroutine, h2FlushEach, h2UpFlushEach = on["call"], on["write"], on["flush"], on["upflush"]
	cert, err := tls.LoadX509KeyPair(os.Getenv("BETCODE_BENCH_H2_CERT"), os.Getenv("BETCODE_BENCH_H2_KEY"))
	if err != nil {
		return fail(err)
	}
	srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
	upCfg, err := mtls.ClientConfig(os.Getenv("BETCODE_BENCH_H2_CA"), "", "", "127.0.0.1")
	if err != nil {
		return fail(err)
	}
	upCfg.NextProtos = []string{"h2"}
	up, err := dialH2Upstream(os.Getenv("BETCODE_BENCH_H2_TARGET"), upCfg)
	if err != nil {
		return fail(err)
	}
	go up.readLoop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	fmt.Printf("ready %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return 0
		}
		go serveH2Client(tls.Server(c, srvCfg), up)
	}
}

// h2Conn is one HTTP/2 connection's writing side (under mu) and its framer.
type h2Conn struct {
	br *bufio.Reader
	fr *http2.Framer // reads: its reader goroutine only; writes: under mu

	mu     sync.Mutex
	bw     *bufio.Writer
	enc    *hpack.Encoder
	encBuf bytes.Buffer
}

func newH2Conn(c net.Conn) *h2Conn {
	h := &h2Conn{br: bufio.NewReaderSize(c, 64<<10), bw: bufio.NewWriterSize(c, 64<<10)}
	h.fr = http2.NewFramer(h.bw, h.br)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.encBuf)
	return h
}

// start writes the first frames: SETTINGS and a large connection window.
func (h *h2Conn) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	h.fr.WriteWindowUpdate(0, 1<<30)
	return h.bw.Flush()
}

// writeHeaders writes fields as one HEADERS frame of stream id. h.mu held.
func (h *h2Conn) writeHeaders(id uint32, fields []hpack.HeaderField, end bool) error {
	h.encBuf.Reset()
	for _, f := range fields {
		h.enc.WriteField(f)
	}
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.encBuf.Bytes(), EndHeaders: true, EndStream: end})
}

// writeData writes b on stream id in frames of at most 16 KiB. h.mu held.
func (h *h2Conn) writeData(id uint32, b []byte, end bool) error {
	for len(b) > 16<<10 {
		if err := h.fr.WriteData(id, false, b[:16<<10]); err != nil {
			return err
		}
		b = b[16<<10:]
	}
	return h.fr.WriteData(id, end, b)
}

// control answers SETTINGS and PING (and takes WINDOW_UPDATE); it reports
// whether f was one of those, and whether it wrote an answer. h.mu held.
func (h *h2Conn) control(f http2.Frame) (handled, wrote bool) {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			h.fr.WriteSettingsAck()
		}
		return true, !f.IsAck()
	case *http2.PingFrame:
		if !f.IsAck() {
			h.fr.WritePing(true, f.Data)
		}
		return true, !f.IsAck()
	case *http2.WindowUpdateFrame:
		return true, false
	}
	return false, false
}

// pass writes an answer frame f of the agent's to the route's client,
// flushed if flush. Its DATA must stay valid until pass returns.
func (r h2Route) pass(f http2.Frame, flush bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		r.c.writeHeaders(r.id, f.Fields, f.StreamEnded())
	case interface {
		Data() []byte
		StreamEnded() bool
	}: // *http2.DataFrame, *dataCopy
		r.c.writeData(r.id, f.Data(), f.StreamEnded())
	case *http2.RSTStreamFrame:
		r.c.fr.WriteRSTStream(r.id, f.ErrCode)
	}
	if flush {
		r.c.bw.Flush()
	}
}

// h2Upstream is the one connection to the agent, shared by every client.
type h2Upstream struct {
	*h2Conn
	next   uint32
	routes map[uint32]h2Route // by upstream stream id; under mu
}

// h2Route is where an upstream stream's frames go back to.
type h2Route struct {
	c  *h2Conn
	id uint32
}

func dialH2Upstream(addr string, cfg *tls.Config) (*h2Upstream, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return nil, err
	}
	u := &h2Upstream{h2Conn: newH2Conn(c), next: 1, routes: map[uint32]h2Route{}}
	return u, u.start()
}

// forward sends one whole request to the agent and remembers where its
// answer goes.
func (u *h2Upstream) forward(back h2Route, fields []hpack.HeaderField, body []byte) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	id := u.next
	u.next += 2
	u.routes[id] = back
	if h2UpFlushEach {
		u.writeHeaders(id, fields, false)
		u.bw.Flush()
		u.writeData(id, body, false)
		u.bw.Flush()
		u.fr.WriteData(id, true, nil)
		return u.bw.Flush()
	}
	if err := u.writeHeaders(id, fields, len(body) == 0); err != nil {
		return err
	}
	if len(body) > 0 {
		if err := u.writeData(id, body, true); err != nil {
			return err
		}
	}
	return u.bw.Flush()
}

// readLoop passes the agent's frames back to their clients.
func (u *h2Upstream) readLoop() {
	dirty := map[*h2Conn]bool{} // the clients and the upstream itself
	for {
		// Nothing more read ahead: what was written leaves now.
		if u.br.Buffered() == 0 {
			for c := range dirty {
				c.mu.Lock()
				c.bw.Flush()
				c.mu.Unlock()
				delete(dirty, c)
			}
		}
		f, err := u.fr.ReadFrame()
		if err != nil {
			fmt.Fprintln(os.Stderr, "h2 floor: upstream:", err)
			os.Exit(1)
		}
		u.mu.Lock()
		if handled, wrote := u.control(f); handled {
			u.mu.Unlock()
			if wrote {
				dirty[u.h2Conn] = true
			}
			continue
		}
		id := f.Header().StreamID
		r, ok := u.routes[id]
		end := f.Header().Flags.Has(http2.FlagHeadersEndStream) // the same bit as DATA's END_STREAM
		if _, rst := f.(*http2.RSTStreamFrame); end || rst {
			delete(u.routes, id)
		}
		if d, isData := f.(*http2.DataFrame); isData && len(d.Data()) > 0 {
			u.fr.WriteWindowUpdate(0, uint32(len(d.Data())))
			dirty[u.h2Conn] = true
		}
		u.mu.Unlock()
		if !ok {
			continue
		}
		if h2WriteGoroutine {
			if d, ok := f.(*http2.DataFrame); ok { // the framer reuses its buffer
				f = &dataCopy{DataFrame: d, data: bytes.Clone(d.Data())}
			}
			done := make(chan struct{})
			go func() { r.pass(f, true); close(done) }()
			<-done // net/http waits for each frame write before the next
			continue
		}
		if h2FlushEach {
			r.pass(f, true)
			continue
		}
		r.pass(f, false)
		dirty[r.c] = true
	}
}

// serveH2Client reads one client's calls and hands each, once whole, to
// the upstream connection.
func serveH2Client(tc *tls.Conn, up *h2Upstream) {
	defer tc.Close()
	if err := tc.Handshake(); err != nil {
		return
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(tc, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	c := newH2Conn(tc)
	if err := c.start(); err != nil {
		return
	}
	type call struct {
		fields []hpack.HeaderField
		body   []byte
	}
	calls := map[uint32]*call{}
	unflushed := false // c has written frames that have not left yet
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "h2 floor: client:", err)
			}
			return
		}
		c.mu.Lock()
		_, wrote := c.control(f)
		var ready *call
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			calls[id] = &call{fields: f.Fields}
			if f.StreamEnded() {
				ready = calls[id]
			}
		case *http2.DataFrame:
			if k := calls[id]; k != nil {
				k.body = append(k.body, f.Data()...)
				if f.StreamEnded() {
					ready = k
				}
			}
			if n := uint32(len(f.Data())); n > 0 {
				c.fr.WriteWindowUpdate(0, n)
				wrote = true
			}
		case *http2.RSTStreamFrame:
			delete(calls, id)
		case *http2.GoAwayFrame:
			c.mu.Unlock()
			return
		}
		unflushed = unflushed || wrote
		if unflushed && c.br.Buffered() == 0 {
			c.bw.Flush()
			unflushed = false
		}
		c.mu.Unlock()
		if ready != nil {
			delete(calls, id)
			if h2CallGoroutine {
				go up.forward(h2Route{c, id}, ready.fields, ready.body)
				continue
			}
			if err := up.forward(h2Route{c, id}, ready.fields, ready.body); err != nil {
				fmt.Fprintln(os.Stderr, "h2 floor: forward:", err)
				return
			}
		}
	}
}

// dataCopy is a DATA frame whose payload outlives the framer's next read.
type dataCopy struct {
	*http2.DataFrame
	data []byte
}

// Data returns the copied payload.
func (d *dataCopy) Data() []byte { return d.data }

// startH2Floor starts the h2 floor process in front of the agent at target,
// with the relay's certificate (it names 127.0.0.1 too) and the relay's
// environment (BETCODE_BENCH_RELAY_ENV: GOMAXPROCS=1 as deployed, say), and
// returns its address and pid.
func startH2Floor(tb testing.TB, target, cert, key, ca string) (addr string, pid int) {
	tb.Helper()
	env := append([]string{h2ModeEnv + "=1", "BETCODE_BENCH_H2_TARGET=" + target,
		"BETCODE_BENCH_H2_CERT=" + cert, "BETCODE_BENCH_H2_KEY=" + key, "BETCODE_BENCH_H2_CA=" + ca}, relayEnv()...)
	addr, pid, err := startChild(tb, env...)
	if err != nil {
		tb.Fatalf("h2 floor did not start: %v", err)
	}
	return addr, pid
}
