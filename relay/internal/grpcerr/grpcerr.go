// Package grpcerr answers gRPC calls that the relay serves over net/http
// (the router, the authentication middleware, the limits) with a status
// that carries the BetCode error code as a google.rpc.ErrorInfo detail
// (domain betcode.dev), as the spec's error catalogue asks, whether or not
// the response has started.
package grpcerr

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Domain is the ErrorInfo domain of BetCode error codes.
const Domain = "betcode.dev"

// Status returns a status with code c and message msg and, when betcode is
// set, an ErrorInfo detail with that reason and metadata md.
func Status(c codes.Code, betcode, msg string, md map[string]string) *status.Status {
	st := status.New(c, msg)
	if betcode != "" {
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: betcode, Domain: Domain, Metadata: md}); err == nil {
			st = d
		}
	}
	return st
}

// Write ends a call with Status(c, betcode, msg, md) (see End).
func Write(w http.ResponseWriter, c codes.Code, betcode, msg string, md map[string]string) {
	End(w, Status(c, betcode, msg, md))
}

// End ends a call with st: as a trailers-only response (the form grpc-go
// uses for a call refused before any message), or, when w is a
// *HeaderTracker whose headers have gone out, in the trailers.
func End(w http.ResponseWriter, st *status.Status) {
	if t, ok := w.(*HeaderTracker); ok && t.HeaderWritten() {
		WriteTrailers(w, st)
		return
	}
	details, _ := proto.Marshal(st.Proto())
	tunnel.WriteStatus(w, int(st.Code()), st.Message(), details)
}

// WriteTrailers sets st as the HTTP/2 trailers of a call whose response
// headers were sent.
func WriteTrailers(w http.ResponseWriter, st *status.Status) {
	details, _ := proto.Marshal(st.Proto())
	h := w.Header()
	h.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(int(st.Code())))
	h.Set(http.TrailerPrefix+"Grpc-Message", tunnel.EncodeGrpcMessage(st.Message()))
	if len(details) > 0 {
		h.Set(http.TrailerPrefix+"Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(details))
	}
}

// HeaderTracker wraps the http.ResponseWriter of a call and remembers
// whether the response headers have gone out, so that End can end a call
// already under way in its trailers. Like the writer it wraps, it is for
// one goroutine at a time.
type HeaderTracker struct {
	http.ResponseWriter
	wrote bool
}

// TrackHeaders wraps w.
func TrackHeaders(w http.ResponseWriter) *HeaderTracker { return &HeaderTracker{ResponseWriter: w} }

// HeaderWritten reports whether the response headers have been sent.
func (t *HeaderTracker) HeaderWritten() bool { return t.wrote }

// WriteHeader sends the response headers.
func (t *HeaderTracker) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

// Write sends body bytes (and the headers, first, if not yet sent).
func (t *HeaderTracker) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Flush sends what is buffered (and the headers, if not yet sent).
func (t *HeaderTracker) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		t.wrote = true
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (t *HeaderTracker) Unwrap() http.ResponseWriter { return t.ResponseWriter }

var _ http.Flusher = (*HeaderTracker)(nil)
