package h2client

import "time"

const (
	defaultMaxHeaderListSize = 256 << 10
	defaultStreamWindow      = 1 << 20
	defaultConnWindow        = 64 << 20
	defaultPingTimeout       = 10 * time.Second
	defaultWriteTimeout      = 30 * time.Second

	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
	// initialWindow is the window every HTTP/2 peer starts with.
	initialWindow = 65535
	// maxReadFrameSize bounds one frame read from the peer. We advertise the
	// default 16 KiB, but tolerate larger frames up to this size.
	maxReadFrameSize = 1 << 20
	// maxStreamID is the largest stream identifier.
	maxStreamID = 1<<31 - 1
	// bufSize is the size of the connection's read and write buffers.
	bufSize = 64 << 10
)

// Options configures a Conn. Zero fields take the defaults given.
type Options struct {
	// MaxHeaderListSize bounds one decoded response header block (headers,
	// or trailers); 0 = 256 KiB.
	MaxHeaderListSize uint32
	// StreamWindow is the receive window per stream (advertised as
	// SETTINGS_INITIAL_WINDOW_SIZE); 0 = 1 MiB.
	StreamWindow uint32
	// ConnWindow is the receive window of the connection; 0 = 64 MiB. It is
	// sent as a WINDOW_UPDATE on stream 0 right after SETTINGS. Values below
	// the protocol's initial 65535 are raised to it.
	ConnWindow uint32
	// PingEvery: after this long with no frame read, send a PING; 0 = never.
	PingEvery time.Duration
	// PingTimeout: no frame (of any kind) read within this after a PING and
	// the connection fails; 0 = 10s when PingEvery is set.
	PingTimeout time.Duration
	// WriteTimeout: a write blocked this long fails the connection; 0 = 30s.
	WriteTimeout time.Duration
}

// withDefaults returns o with zero fields set to their defaults and values
// clamped to what HTTP/2 allows.
func (o Options) withDefaults() Options {
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = defaultMaxHeaderListSize
	}
	if o.StreamWindow == 0 {
		o.StreamWindow = defaultStreamWindow
	}
	if o.StreamWindow > maxWindow {
		o.StreamWindow = maxWindow
	}
	if o.ConnWindow == 0 {
		o.ConnWindow = defaultConnWindow
	}
	if o.ConnWindow < initialWindow {
		o.ConnWindow = initialWindow
	}
	if o.ConnWindow > maxWindow {
		o.ConnWindow = maxWindow
	}
	if o.PingEvery > 0 && o.PingTimeout <= 0 {
		o.PingTimeout = defaultPingTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	return o
}
