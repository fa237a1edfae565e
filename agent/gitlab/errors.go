package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
)

// BetCode error codes of GitLabService. RATE_LIMITED, SESSION_NOT_FOUND and
// the workspace codes are the spec's; the GITLAB_* ones are BetCode's own.
const (
	CodeAuthFailed  = "GITLAB_AUTH_FAILED"     // PERMISSION_DENIED: 401, the token is missing, wrong or expired
	CodeForbidden   = "GITLAB_FORBIDDEN"       // PERMISSION_DENIED: 403, the token lacks the scope or role
	CodeNotFound    = "GITLAB_NOT_FOUND"       // NOT_FOUND: 404, no such project/item, or the token cannot see it
	CodeRateLimited = "RATE_LIMITED"           // RESOURCE_EXHAUSTED: 429 after the retries, retry_after_ms
	CodeUnreachable = "GITLAB_UNREACHABLE"     // UNAVAILABLE: no connection to GitLab
	CodeUnavailable = "GITLAB_UNAVAILABLE"     // UNAVAILABLE: GitLab answered 5xx
	CodeRejected    = "GITLAB_REJECTED"        // INVALID_ARGUMENT: GitLab refused the request (400, 422)
	CodeNoProject   = "GITLAB_PROJECT_UNKNOWN" // FAILED_PRECONDITION: the directory's remotes are not on the configured GitLab
)

// httpError is an answer of GitLab other than 2xx.
type httpError struct {
	status     int
	message    string
	retryAfter time.Duration
}

// toStatus maps err of a call about what (e.g. "merge request !3 of
// group/repo") to a gRPC status; base is the GitLab URL for messages.
func toStatus(err error, what, base string) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var er *gl.ErrorResponse
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "cancelled while asking GitLab about "+what)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "GitLab at "+base+" did not answer in time about "+what)
	case errors.Is(err, ErrSessionNotFound):
		return server.Status(codes.NotFound, server.CodeSessionNotFound, "Session does not exist: "+err.Error())
	case errors.Is(err, errNoProject):
		return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, err.Error())
	case errors.Is(err, errNoDir):
		return server.Status(codes.NotFound, server.CodeDirectoryNotFound, err.Error())
	case errors.Is(err, errGitMissing):
		return server.Status(codes.FailedPrecondition, server.CodeGitUnavailable, "git is needed to find the project of a directory: "+err.Error())
	case errors.Is(err, errNotRepo), errors.Is(err, errNotOnGitLab):
		return server.Status(codes.FailedPrecondition, CodeNoProject, err.Error())
	case errors.Is(err, gl.ErrNotFound):
		return httpStatus(httpError{status: http.StatusNotFound}, what, base)
	case errors.As(err, &er) && er.Response != nil:
		return httpStatus(httpError{status: er.Response.StatusCode, message: er.Message, retryAfter: retryAfter(er.Response.Header, time.Now())}, what, base)
	}
	if cause, ok := transport(err); ok {
		return server.Status(codes.Unavailable, CodeUnreachable, fmt.Sprintf("cannot reach GitLab at %s: %v", base, cause))
	}
	return server.Status(codes.Internal, server.CodeInternal, fmt.Sprintf("GitLab at %s about %s: %v", base, what, err))
}

// httpStatus maps a GitLab HTTP error.
func httpStatus(e httpError, what, base string) error {
	msg := strings.TrimSpace(e.message)
	switch {
	case e.status == http.StatusUnauthorized:
		return server.Status(codes.PermissionDenied, CodeAuthFailed, fmt.Sprintf(
			"GitLab at %s refused the token (401): set a valid access token with the read_api scope in gitlab-token, BETCODE_GITLAB_TOKEN or gitlab-token-file, and restart the agent", base))
	case e.status == http.StatusForbidden:
		return server.Status(codes.PermissionDenied, CodeForbidden, fmt.Sprintf(
			"GitLab at %s does not let this token read %s (403): it needs the read_api scope and at least the Reporter role", base, what))
	case e.status == http.StatusNotFound:
		return server.Status(codes.NotFound, CodeNotFound, fmt.Sprintf(
			"GitLab at %s has no %s, or the token cannot see it (404)", base, what))
	case e.status == http.StatusTooManyRequests:
		ms := e.retryAfter.Milliseconds()
		return server.StatusWith(codes.ResourceExhausted, CodeRateLimited, fmt.Sprintf(
			"GitLab at %s is rate limiting this token (429): retry after %s", base, e.retryAfter.Round(time.Second)),
			map[string]string{"retry_after_ms": strconv.FormatInt(ms, 10)})
	case e.status >= 500:
		return server.Status(codes.Unavailable, CodeUnavailable, fmt.Sprintf("GitLab at %s failed (%d): %s", base, e.status, msg))
	case e.status == http.StatusBadRequest || e.status == http.StatusUnprocessableEntity:
		return server.Status(codes.InvalidArgument, CodeRejected, fmt.Sprintf("GitLab at %s refused the request about %s (%d): %s", base, what, e.status, msg))
	}
	return server.Status(codes.Unknown, CodeRejected, fmt.Sprintf("GitLab at %s answered %d about %s: %s", base, e.status, what, msg))
}

// transport returns the cause of a failure to talk to GitLab at all
// (refused, DNS, TLS, reset) rather than an answer, without the request
// URL net/http wraps it in.
func transport(err error) (error, bool) {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err, true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe, true
	}
	return nil, false
}
