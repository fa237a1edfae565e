package enrollsvc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// DefaultMachineName names a machine enrolled without a name.
const DefaultMachineName = "machine"

// maxNameLen is the longest machine name, in characters.
const maxNameLen = 64

// Enroll consumes a join token and signs the caller's CSR for a new machine
// owned by the token's team (or, without one, its user). Everything that
// can be checked without the store, the CSR included, is checked before the
// token is consumed, so a malformed request does not burn it.
func (s *Service) Enroll(ctx context.Context, req *pb.EnrollRequest) (*pb.EnrollResponse, error) {
	now := s.now()
	ev := store.AuditEvent{Action: ActionEnrollRefused, Remote: remoteAddr(ctx)}
	if s.CA == nil {
		return nil, s.refuse(ctx, ev, errNoCA)
	}
	hash, err := authtoken.Parse(authtoken.Join, req.GetJoinToken())
	if err != nil {
		// Parse's errors say which check failed, never what the token is.
		return nil, s.refuse(ctx, ev, &refusal{code: codes.InvalidArgument, betcode: CodeJoinTokenMalformed, msg: err.Error()})
	}
	tokenID := authtoken.ID(hash)
	ev.Target = tokenID
	name, err := machineName(req.GetName())
	if err != nil {
		return nil, s.refuse(ctx, ev, &refusal{code: codes.InvalidArgument, betcode: CodeInvalidArgument, msg: err.Error()})
	}
	id := newMachineID()
	// Signing is pure: a certificate signed for a token that turns out to
	// be refused is dropped, never recorded or sent.
	certPEM, cert, err := s.CA.SignMachineCSR(req.GetCsrDer(), id, s.lifetime(), now)
	if errors.Is(err, pki.ErrBadCSR) {
		return nil, s.refuse(ctx, ev, &refusal{code: codes.InvalidArgument, betcode: CodeInvalidCSR, msg: "csr_der: " + err.Error()})
	}
	if err != nil {
		return nil, s.refuse(ctx, ev, internal("cannot sign certificates", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}

	// The owner's machine limit, checked before the token is spent, so
	// that the same token enrolls once a machine is revoked. (Concurrent
	// enrollments of one owner may pass it together: a few over at most.)
	if limit := s.maxMachines(); limit > 0 {
		if r := s.overLimit(ctx, hash, tokenID, limit, now); r != nil {
			return nil, s.refuse(ctx, ev, r)
		}
	}

	// From here on the token may be spent: finish whatever the caller does.
	ctx, cancel := detach(ctx)
	defer cancel()
	tok, err := s.Store.ConsumeEnrollToken(ctx, hash, id, now)
	if err != nil {
		return nil, s.refuse(ctx, ev, consumeRefusal(tokenID, tok, err))
	}
	ev.Target = id
	owner := ownerOf(tok)
	spent := fmt.Sprintf("join token %s was used up, but the machine could not be enrolled; ask for a new one", tokenID)
	err = s.Store.UpsertMachine(ctx, store.Machine{ID: id, OwnerID: tok.UserID, TeamID: tok.TeamID, Name: name, RegisteredAt: now})
	if err != nil {
		return nil, s.refuse(ctx, ev, internal(spent, fmt.Errorf("register machine %s: %w", id, err)))
	}
	serial := mtls.SerialHex(cert)
	if err := s.Store.RecordCertificate(ctx, id, serial, cert.NotAfter); err != nil {
		return nil, s.refuse(ctx, ev, internal(spent, fmt.Errorf("record certificate %s of machine %s: %w", serial, id, err)))
	}
	s.audit(ctx, store.AuditEvent{
		Action: ActionEnrolled, Target: id, Remote: ev.Remote, Outcome: outcomeOK,
		Detail: fmt.Sprintf("%s, join token %s, certificate %s", owner, tokenID, serial),
	})
	s.log().Info("enroll service: machine enrolled", "machine_id", id, "owner", owner, "join_token_id", tokenID,
		"serial", serial, "not_after", cert.NotAfter, "remote", ev.Remote)
	return &pb.EnrollResponse{
		MachineId:      id,
		CertificatePem: certPEM,
		CaPem:          s.CA.CertPEM(),
		NotAfter:       timestamppb.New(cert.NotAfter),
		TeamId:         tok.TeamID,
		OwnerUserId:    tok.UserID,
	}, nil
}

// overLimit refuses a join token whose owner (its team, or its user) has
// limit machines already, not revoked. A token that cannot be read or is
// not live is left to ConsumeEnrollToken, which says why.
func (s *Service) overLimit(ctx context.Context, hash []byte, tokenID string, limit int, now time.Time) *refusal {
	tok, err := s.Store.GetEnrollToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) || err == nil && (!tok.UsedAt.IsZero() || !tok.ExpiresAt.IsZero() && !now.Before(tok.ExpiresAt)) {
		return nil
	}
	if err != nil {
		return internal("cannot read the join token now; try again", err)
	}
	ms, err := s.Store.ListMachines(ctx, tok.UserID) // the user's own and their teams'
	if err != nil {
		return internal("cannot count the machines of the join token's owner now; try again", err)
	}
	n := 0
	for _, m := range ms {
		if m.TeamID == tok.TeamID && (tok.TeamID != "" || m.OwnerID == tok.UserID) {
			n++
		}
	}
	if n < limit {
		return nil
	}
	owner := ownerOf(tok)
	return &refusal{code: codes.ResourceExhausted, betcode: CodeMachineLimit,
		msg: fmt.Sprintf("%s already has %d machines, the most this relay allows (betcode-relay serve --max-machines-per-owner); revoke one it no longer uses (betcode-relay admin machine revoke ID), then enroll again with the same join token (%s)", owner, n, tokenID)}
}

// ownerOf names the owner of the machine tok enrolls: "team T" or "user U".
func ownerOf(tok store.EnrollToken) string {
	if tok.TeamID != "" {
		return "team " + tok.TeamID
	}
	return "user " + tok.UserID
}

// consumeRefusal explains why ConsumeEnrollToken refused token tokenID.
func consumeRefusal(tokenID string, tok store.EnrollToken, err error) *refusal {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &refusal{code: codes.Unauthenticated, betcode: CodeJoinTokenUnknown,
			msg: "join token not recognised; check that it was created on this relay, or ask for a new one"}
	case errors.Is(err, store.ErrTokenUsed):
		return &refusal{code: codes.FailedPrecondition, betcode: CodeJoinTokenUsed,
			msg: fmt.Sprintf("join token %s was already used; ask for a new one (betcode-relay admin enroll-token create)", tokenID)}
	case errors.Is(err, store.ErrExpired):
		when := ""
		if !tok.ExpiresAt.IsZero() {
			when = " at " + tok.ExpiresAt.UTC().Format(time.RFC3339)
		}
		return &refusal{code: codes.Unauthenticated, betcode: CodeJoinTokenExpired,
			msg: fmt.Sprintf("join token %s expired%s; ask for a new one (betcode-relay admin enroll-token create)", tokenID, when)}
	}
	return internal("cannot check the join token", fmt.Errorf("consume join token %s: %w", tokenID, err))
}

// machineName returns the machine's display name: name without surrounding
// space, DefaultMachineName when that is empty.
func machineName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return DefaultMachineName, nil
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameLen {
		return "", fmt.Errorf("name: want at most %d printable characters of UTF-8", maxNameLen)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return "", fmt.Errorf("name: character %U is not printable", r)
		}
	}
	return name, nil
}

// newMachineID returns "m-" and 12 random characters of lower-case base32:
// 60 bits, so that ids never collide in practice (a collision with another
// owner's machine would fail UpsertMachine with ErrConflict).
func newMachineID() string {
	return "m-" + strings.ToLower(rand.Text()[:12])
}
