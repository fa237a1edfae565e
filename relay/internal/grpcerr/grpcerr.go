// Package grpcerr answers gRPC calls that the relay serves over net/http
// (the router and its middleware) with a status that carries the BetCode
// error code as a google.rpc.ErrorInfo detail (domain betcode.dev), as the
// spec's error catalogue asks, whether or not the response has started.
package grpcerr

import (
	"encoding/base64"
	"net/http"
	"net/url"
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

// Write answers a call whose response has not started with the status.
func Write(w http.ResponseWriter, c codes.Code, betcode, msg string, md map[string]string) {
	st := Status(c, betcode, msg, md)
	details, _ := proto.Marshal(st.Proto())
	tunnel.WriteStatus(w, int(c), msg, details)
}

// WriteTrailers ends a call whose response headers were already sent with
// the status, as HTTP/2 trailers.
func WriteTrailers(w http.ResponseWriter, c codes.Code, betcode, msg string, md map[string]string) {
	st := Status(c, betcode, msg, md)
	details, _ := proto.Marshal(st.Proto())
	h := w.Header()
	h.Set(http.TrailerPrefix+"Grpc-Status", strconv.Itoa(int(c)))
	h.Set(http.TrailerPrefix+"Grpc-Message", url.PathEscape(msg))
	h.Set(http.TrailerPrefix+"Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(details))
}
