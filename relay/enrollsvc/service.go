// Package enrollsvc implements EnrollService, through which a machine joins
// the relay: it trades a single-use join token and a certificate signing
// request for a machine certificate signed by the relay's CA (Enroll), and
// later renews that certificate over its own mTLS connection
// (RenewCertificate). The machine's private key never leaves the machine.
//
// The relay decides the machine id and everything the certificate says
// (pki.CA.SignMachineCSR); the join token decides the owner. Every attempt,
// granted or refused, is audited; a token is never logged, audited or
// echoed, only its public id (authtoken.ID).
package enrollsvc

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// DefaultLifetime is the lifetime of the certificates the service signs
// when Service.Lifetime is zero. Agents renew well before it ends.
const DefaultLifetime = 30 * 24 * time.Hour

// commitTimeout bounds the store writes that follow a consumed join token.
// They run detached from the caller's context: once the token is spent,
// a caller hanging up must not leave the machine half enrolled.
const commitTimeout = 15 * time.Second

// DefaultMaxMachines is how many machines one owner (a user's own, or a
// team's) may have enrolled when Service.MaxMachines is zero.
const DefaultMaxMachines = 100

// Store is the part of the relay's store the service uses.
type Store interface {
	ConsumeEnrollToken(ctx context.Context, hash []byte, machineID string, now time.Time) (store.EnrollToken, error)
	GetEnrollToken(ctx context.Context, hash []byte) (store.EnrollToken, error)
	ListMachines(ctx context.Context, userID string) ([]store.Machine, error)
	UpsertMachine(ctx context.Context, m store.Machine) error
	GetMachine(ctx context.Context, id string) (store.Machine, error)
	RecordCertificate(ctx context.Context, machineID, serial string, notAfter time.Time) error
	AppendAudit(ctx context.Context, e store.AuditEvent) error
}

var _ Store = store.Store(nil)

// Service implements pb.EnrollServiceServer. Store is required; the zero
// values of the other fields are usable.
type Service struct {
	pb.UnimplementedEnrollServiceServer

	Store Store
	// CA signs machine certificates. Nil means this relay has no CA key:
	// both calls then fail with FAILED_PRECONDITION.
	CA *pki.CA
	// Lifetime of the certificates signed; zero means DefaultLifetime.
	// Certificates never outlive the CA.
	Lifetime time.Duration
	// MaxMachines bounds the machines (not revoked) of one owner: a user's
	// own, or a team's. Each connected machine holds a tunnel on the relay,
	// which every user shares, so one user cannot enroll without end.
	// Zero means DefaultMaxMachines; negative, no limit.
	MaxMachines int
	// Log receives one line per call; nil discards.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// IsRevoked, when set, reports whether a machine or one of its
	// certificates (serial as mtls.SerialHex) is revoked: a fast path over
	// the store's record, which RenewCertificate checks as well.
	IsRevoked func(machineID, serial string) bool
}

var _ pb.EnrollServiceServer = (*Service)(nil)

// maxMachines is MaxMachines with its default; 0 means no limit.
func (s *Service) maxMachines() int {
	switch {
	case s.MaxMachines == 0:
		return DefaultMaxMachines
	case s.MaxMachines < 0:
		return 0
	}
	return s.MaxMachines
}

// Validate reports a Service that cannot work.
func (s *Service) Validate() error {
	if s.Store == nil {
		return errors.New("enroll service: no store")
	}
	if s.Lifetime < 0 {
		return errors.New("enroll service: negative certificate lifetime")
	}
	return nil
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Service) lifetime() time.Duration {
	if s.Lifetime == 0 {
		return DefaultLifetime
	}
	return s.Lifetime
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// detach returns a context for writes that must complete whatever the
// caller does, bounded by commitTimeout.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
}
