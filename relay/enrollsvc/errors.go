package enrollsvc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/relay/store"
)

// BetCode error codes of EnrollService, sent as the Reason of an ErrorInfo
// detail (domain grpcerr.Domain, "betcode.dev") next to the gRPC code in
// parentheses.
const (
	// CodeNoCAKey (FAILED_PRECONDITION): the relay runs without --ca-key.
	CodeNoCAKey = "NO_CA_KEY"
	// CodeJoinTokenMalformed (INVALID_ARGUMENT): not a join token at all
	// (a typo, a cut-off paste, a client token).
	CodeJoinTokenMalformed = "JOIN_TOKEN_MALFORMED"
	// CodeJoinTokenUnknown (UNAUTHENTICATED): well formed, but not one
	// this relay issued (or it was deleted).
	CodeJoinTokenUnknown = "JOIN_TOKEN_UNKNOWN"
	// CodeJoinTokenExpired (UNAUTHENTICATED): past its expiry.
	CodeJoinTokenExpired = "JOIN_TOKEN_EXPIRED"
	// CodeJoinTokenUsed (FAILED_PRECONDITION): it already enrolled a
	// machine.
	CodeJoinTokenUsed = "JOIN_TOKEN_USED"
	// CodeInvalidCSR (INVALID_ARGUMENT): the CSR does not parse, is not
	// signed by its key, or has a key type the relay does not accept.
	CodeInvalidCSR = "INVALID_CSR"
	// CodeInvalidArgument (INVALID_ARGUMENT): another malformed field.
	CodeInvalidArgument = "INVALID_ARGUMENT"
	// CodeNoClientCert (UNAUTHENTICATED): RenewCertificate without a
	// verified machine certificate.
	CodeNoClientCert = "NO_CLIENT_CERT"
	// CodeMachineNotFound (NOT_FOUND): RenewCertificate for a machine the
	// store does not know.
	CodeMachineNotFound = "MACHINE_NOT_FOUND"
	// CodeMachineRevoked (PERMISSION_DENIED): the machine or its
	// certificate was revoked.
	CodeMachineRevoked = "MACHINE_REVOKED"
	// CodeMachineLimit (RESOURCE_EXHAUSTED): the token's owner (its team,
	// or its user) already has Service.MaxMachines machines.
	CodeMachineLimit = "MACHINE_LIMIT"
	// CodeInternal (INTERNAL): the relay failed; its log has the cause.
	CodeInternal = "INTERNAL"
)

// Audit actions and outcomes the service records.
const (
	ActionEnrolled      = "machine.enrolled"
	ActionEnrollRefused = "enroll.refused"
	ActionRenewed       = "cert.renewed"
	ActionRenewRefused  = "renew.refused"

	outcomeOK     = "ok"
	outcomeDenied = "denied"
	outcomeError  = "error"
)

// refusal is a call's failure: what the caller is told and what the audit
// log records.
type refusal struct {
	code    codes.Code
	betcode string
	// msg goes to the caller and, as Detail, to the audit log: never a
	// secret.
	msg string
	// cause is logged, not sent (an internal error's text).
	cause error
}

func (r *refusal) status() error {
	return grpcerr.Status(r.code, r.betcode, r.msg, nil).Err()
}

func (r *refusal) outcome() string {
	if r.code == codes.Internal {
		return outcomeError
	}
	return outcomeDenied
}

// refuse audits and logs r for event ev (Action, Actor, Target, Remote
// set) and returns r's status error.
func (s *Service) refuse(ctx context.Context, ev store.AuditEvent, r *refusal) error {
	ev.Outcome, ev.Detail = r.outcome(), r.msg
	s.audit(ctx, ev)
	level, attrs := slog.LevelInfo, []any{"action", ev.Action, "code", r.betcode, "remote", ev.Remote, "reason", r.msg}
	if ev.Actor != "" {
		attrs = append(attrs, "actor", ev.Actor)
	}
	if ev.Target != "" {
		attrs = append(attrs, "target", ev.Target)
	}
	if r.cause != nil {
		level, attrs = slog.LevelError, append(attrs, "err", r.cause)
	}
	s.log().Log(ctx, level, "enroll service: refused", attrs...)
	return r.status()
}

// audit appends ev at the service's clock. An audit failure does not fail
// the call (a refusal stays a refusal, an enrolled machine stays enrolled)
// but is logged as an error.
func (s *Service) audit(ctx context.Context, ev store.AuditEvent) {
	ctx, cancel := detach(ctx)
	defer cancel()
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	if err := s.Store.AppendAudit(ctx, ev); err != nil {
		s.log().Error("enroll service: audit event lost", "action", ev.Action, "target", ev.Target, "outcome", ev.Outcome, "err", err)
	}
}

// remoteAddr is the caller's address for the audit log.
func remoteAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func internal(msg string, cause error) *refusal {
	return &refusal{code: codes.Internal, betcode: CodeInternal, msg: msg + " (the relay's log has the cause)", cause: cause}
}

var errNoCA = &refusal{
	code: codes.FailedPrecondition, betcode: CodeNoCAKey,
	msg: "this relay has no CA key (--ca-key); enroll with certificates from `betcode-relay certs machine` instead",
}
