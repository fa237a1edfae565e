package webapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorDomain is the ErrorInfo domain of BetCode error codes
// (agent/server.ErrorDomain).
const errorDomain = "betcode.dev"

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// HTTPStatus maps a gRPC code to the HTTP status of docs/web-api.md; every
// handler of the web API (this package's, relay/push's) answers with it.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted, codes.FailedPrecondition:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// betcodeError is a gRPC error taken apart: its BetCode code (else the
// gRPC code's name), message, HTTP status and ErrorInfo metadata.
type betcodeError struct {
	status  int
	code    string
	message string
	details map[string]string
}

// fromGRPC takes a gRPC error apart; errors that are not statuses are 500
// INTERNAL.
func fromGRPC(err error) betcodeError {
	st, ok := status.FromError(err)
	if !ok {
		return betcodeError{status: http.StatusInternalServerError, code: "INTERNAL", message: err.Error()}
	}
	e := betcodeError{status: HTTPStatus(st.Code()), code: CodeName(st.Code()), message: st.Message()}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == errorDomain && ei.Reason != "" {
			e.code, e.details = ei.Reason, ei.Metadata
			break
		}
	}
	return e
}

// CodeName is a gRPC code's name as the spec spells it, e.g. NOT_FOUND:
// the web API's error code when no BetCode code is attached.
func CodeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// writeGRPCError answers with the HTTP form of a gRPC error.
func writeGRPCError(w http.ResponseWriter, err error) {
	e := fromGRPC(err)
	if n, ok := e.retryAfterMs(); ok && e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.FormatInt((n+999)/1000, 10))
	}
	writeError(w, e.status, e.code, e.message)
}

// retryAfterMs is the relay's retry_after_ms of e (a rate limit, a machine
// moving between replicas), if it has one.
func (e betcodeError) retryAfterMs() (int64, bool) {
	n, err := strconv.ParseInt(e.details["retry_after_ms"], 10, 64)
	return n, err == nil && n >= 0
}

// writeError answers with an error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errBodyTooLarge is readJSON's error for a body over MaxBodyBytes.
var errBodyTooLarge = errors.New("request body is larger than 32 MiB")

// readJSON decodes the request body into v; it answers the error itself
// and returns false when the body is malformed or too large.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength > MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", errBodyTooLarge.Error())
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", errBodyTooLarge.Error())
			return false
		}
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "malformed JSON body: "+err.Error())
		return false
	}
	return true
}
