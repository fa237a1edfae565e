package limits

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// BetCode error codes of refused calls: the ErrorInfo reason (domain
// ErrorDomain) and, on event streams, the ErrorEvent code.
const (
	// CodeRateLimited: the token's call rate is exceeded (the API's
	// error catalogue); details carry retry_after_ms.
	CodeRateLimited = "RATE_LIMITED"
	// CodeTooManyStreams: a concurrent-call cap is reached.
	CodeTooManyStreams = "TOO_MANY_STREAMS"
	// CodeMessageTooLarge: a request message is over MaxMessageBytes.
	CodeMessageTooLarge = "MESSAGE_TOO_LARGE"
)

// ErrorDomain is the ErrorInfo domain of BetCode error codes.
const ErrorDomain = grpcerr.Domain

// RetryAfterKey is the ErrorInfo metadata and ErrorEvent details key of
// the wait, in milliseconds, before a rate-limited call may be retried.
const RetryAfterKey = "retry_after_ms"

// eventStreams are the methods whose responses are AgentEvents: a refused
// call of theirs also gets an ErrorEvent, which is what a client reading
// the stream shows.
var eventStreams = map[string]bool{
	"/betcode.v1.AgentService/Converse":      true,
	"/betcode.v1.AgentService/ResumeSession": true,
}

// WriteRateLimited answers r with RESOURCE_EXHAUSTED carrying an ErrorInfo
// {reason RATE_LIMITED, domain betcode.dev, metadata retry_after_ms} and a
// RetryInfo detail. A call that streams AgentEvents (Converse,
// ResumeSession) first gets one fatal ErrorEvent with the same code and
// retry_after_ms.
func WriteRateLimited(w http.ResponseWriter, r *http.Request, retryAfter time.Duration) {
	ms := retryAfterMillis(retryAfter)
	wait := strconv.FormatInt(ms, 10)
	msg := "rate limit exceeded: retry after " + wait + " ms"
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: CodeRateLimited, Domain: ErrorDomain, Metadata: map[string]string{RetryAfterKey: wait}},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(ms) * time.Millisecond)},
	); err == nil {
		st = d
	}
	var event *pb.AgentEvent
	if r != nil && eventStreams[r.URL.Path] {
		event = &pb.AgentEvent{Timestamp: timestamppb.Now(), Event: &pb.AgentEvent_Error{Error: &pb.ErrorEvent{
			Code: CodeRateLimited, Message: msg, IsFatal: true, Details: map[string]string{RetryAfterKey: wait},
		}}}
	}
	writeStatus(w, st, event)
}

// WriteExhausted answers a call with RESOURCE_EXHAUSTED and an ErrorInfo
// detail {reason betcodeCode, domain betcode.dev}: CodeTooManyStreams for
// AcquireStream's refusals, CodeMessageTooLarge for MessageReader's. If w
// is a *HeaderTracker whose headers have gone out (the call was under
// way), the status goes in the trailers.
func WriteExhausted(w http.ResponseWriter, betcodeCode, msg string) {
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: betcodeCode, Domain: ErrorDomain}); err == nil {
		st = d
	}
	writeStatus(w, st, nil)
}

// retryAfterMillis rounds d up to whole milliseconds, at least one: a
// client told 0 would retry at once.
func retryAfterMillis(d time.Duration) int64 {
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
}

// writeStatus ends a call with st, after event (framed) if set. With
// neither headers sent nor an event it is a trailers-only response, the
// form grpc-go uses for a call refused before any message.
func writeStatus(w http.ResponseWriter, st *status.Status, event *pb.AgentEvent) {
	if event == nil {
		grpcerr.End(w, st)
		return
	}
	if t, ok := w.(*HeaderTracker); !ok || !t.HeaderWritten() {
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
	}
	if b, err := proto.Marshal(event); err == nil {
		_, _ = w.Write(tunnel.Frame(b)) // a client gone away gets nothing anyway
	}
	grpcerr.WriteTrailers(w, st)
}

// HeaderTracker is grpcerr's: WriteExhausted ends a call already under way
// (a message too large sent mid-stream) in its trailers.
type HeaderTracker = grpcerr.HeaderTracker

// TrackHeaders wraps w.
func TrackHeaders(w http.ResponseWriter) *HeaderTracker { return grpcerr.TrackHeaders(w) }
