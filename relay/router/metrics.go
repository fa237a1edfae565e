package router

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/betcode-dev/betcode/shared/betcodepb" // registers the API's services
	"github.com/betcode-dev/betcode/shared/callpark"
	"github.com/betcode-dev/betcode/shared/h2client"
)

// Metrics are the router's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	// Forwarded counts forwarded calls as they end, by service, method
	// and gRPC code.
	Forwarded *prometheus.CounterVec
	// Duration is how long forwarded calls took, by service and method.
	Duration    *prometheus.HistogramVec
	OpenStreams prometheus.Gauge
	// Bytes counts gRPC message bytes through tunnels, by direction.
	Bytes     *prometheus.CounterVec
	Offline   prometheus.Counter
	Buffered  prometheus.Counter
	Delivered prometheus.Counter
	// ToPeer counts calls handed to the replica holding the tunnel.
	ToPeer prometheus.Counter

	// methods holds each API method's pre-bound metrics, by path; a
	// path not in it is counted as service and method "other".
	methods           map[string]*methodMetrics
	other             *methodMetrics
	toMachine, toUser prometheus.Counter
}

// methodMetrics are one method's pre-bound series: a forwarded call looks
// up its labels once and allocates nothing for them.
type methodMetrics struct {
	duration prometheus.Observer
	codes    [codeLabels]prometheus.Counter
}

// codeLabels is the number of gRPC codes (OK .. Unauthenticated); an
// answer with any other code counts as Unknown.
const codeLabels = int(codes.Unauthenticated) + 1

// NewMetrics registers the router's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_forwarded_calls_total", Help: "Client calls forwarded to a machine through its tunnel, counted as they end, by service, method and gRPC code.",
		}, []string{"service", "method", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "betcode_relay_forwarded_call_duration_seconds", Help: "Time from routing a forwarded call to its end, by service and method (streams last as long as their client keeps them).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60, 600},
		}, []string{"service", "method"}),
		OpenStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "betcode_relay_open_streams", Help: "Forwarded calls (HTTP/2 streams through tunnels) open now.",
		}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "betcode_relay_tunnel_bytes_total", Help: "gRPC message bytes of forwarded calls through tunnels: to_machine (requests) and from_machine (responses).",
		}, []string{"direction"}),
		Offline: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_offline_calls_total", Help: "Calls refused because their machine was offline.",
		}),
		Buffered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_buffered_messages_total", Help: "Requests stored for offline machines.",
		}),
		Delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_delivered_messages_total", Help: "Buffered requests delivered after reconnection.",
		}),
		ToPeer: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "betcode_relay_peer_forwarded_calls_total", Help: "Client calls handed to the relay replica that holds the machine's tunnel.",
		}),
		methods: map[string]*methodMetrics{},
	}
	reg.MustRegister(m.Forwarded, m.Duration, m.OpenStreams, m.Bytes, m.Offline, m.Buffered, m.Delivered, m.ToPeer)
	m.toMachine = m.Bytes.WithLabelValues("to_machine")
	m.toUser = m.Bytes.WithLabelValues("from_machine")
	m.other = m.bind("other", "other")
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "betcode.v1" {
			return true
		}
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			if relayServices[string(sd.FullName())] {
				continue
			}
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				path := "/" + string(sd.FullName()) + "/" + string(md.Name())
				m.methods[path] = m.bind(string(sd.FullName()), string(md.Name()))
			}
		}
		return true
	})
	return m
}

func (m *Metrics) bind(service, method string) *methodMetrics {
	mm := &methodMetrics{duration: m.Duration.WithLabelValues(service, method)}
	for c := range mm.codes {
		mm.codes[c] = m.Forwarded.WithLabelValues(service, method, codes.Code(c).String())
	}
	return mm
}

// call starts measuring one forwarded call of the method at path; its
// end is recorded by (*callMetrics).done. It returns nil when m is nil.
func (m *Metrics) call(path string, start time.Time) *callMetrics {
	if m == nil {
		return nil
	}
	mm := m.methods[path]
	if mm == nil {
		mm = m.other
	}
	m.OpenStreams.Inc()
	return &callMetrics{m: m, method: mm, start: start}
}

// callMetrics measures one forwarded call: it wraps the response writer
// and the request body to count their bytes (per call, added to the
// shared counters once at its end).
type callMetrics struct {
	m      *Metrics
	method *methodMetrics
	start  time.Time
	w      countingWriter
	body   countingBody
}

// wrap returns w and r's body, counting the bytes through them.
func (c *callMetrics) wrap(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if c == nil {
		return w
	}
	c.w.ResponseWriter = w
	if r.Body != nil && r.Body != http.NoBody {
		c.body.ReadCloser = r.Body
		r.Body = &c.body
	}
	return &c.w
}

// done records the call's end; its code is the grpc-status the answer
// carried (in its trailers, or in its headers for a trailers-only answer),
// Canceled when it carried none (the client left).
func (c *callMetrics) done(h http.Header) {
	if c == nil {
		return
	}
	code := int(codes.Canceled)
	s := h[http.TrailerPrefix+"Grpc-Status"]
	if len(s) == 0 {
		s = h["Grpc-Status"]
	}
	if len(s) > 0 {
		if n, err := strconv.Atoi(s[0]); err == nil && n >= 0 && n < codeLabels {
			code = n
		} else {
			code = int(codes.Unknown)
		}
	}
	c.method.codes[code].Inc()
	c.method.duration.Observe(time.Since(c.start).Seconds())
	c.m.OpenStreams.Dec()
	if n := c.body.n.Load(); n > 0 {
		c.m.toMachine.Add(float64(n))
	}
	if c.w.n > 0 {
		c.m.toUser.Add(float64(c.w.n))
	}
}

// countingWriter counts the bytes written to a call's client. It keeps
// the Flusher the tunnel's copy loop relies on.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the bytes read from a call's request body. The
// transport reads it on its own goroutine, which may still be at it when
// the call ends: hence the atomic (bytes read after that go uncounted).
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

// Buffered passes on what the body can say without blocking (the engine
// front's bodies can), so that the tunnel sends a whole request at once.
func (b *countingBody) Buffered() (n int, ended bool) {
	if bb, ok := b.ReadCloser.(h2client.Buffered); ok {
		return bb.Buffered()
	}
	return 0, false
}

// Notify passes the body's callback on (callpark.Notifier).
func (b *countingBody) Notify(f func()) bool {
	return callpark.NotifyVia(b.ReadCloser, f)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (m *Metrics) offline() {
	if m != nil {
		m.Offline.Inc()
	}
}

func (m *Metrics) buffered() {
	if m != nil {
		m.Buffered.Inc()
	}
}

func (m *Metrics) delivered() {
	if m != nil {
		m.Delivered.Inc()
	}
}

func (m *Metrics) toPeer() {
	if m != nil {
		m.ToPeer.Inc()
	}
}
