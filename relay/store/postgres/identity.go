package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// errTODO marks identity methods not written yet.
var errTODO = errors.New("identity store: not implemented yet")

// CreateUser implements store.Identity.
func (s *Store) CreateUser(ctx context.Context, u store.User) error { return errTODO }

// GetUser implements store.Identity.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	return store.User{}, errTODO
}

// ListUsers implements store.Identity.
func (s *Store) ListUsers(ctx context.Context) ([]store.User, error) { return nil, errTODO }

// SetUserDisabled implements store.Identity.
func (s *Store) SetUserDisabled(ctx context.Context, id string, disabled bool) error { return errTODO }

// CreateTeam implements store.Identity.
func (s *Store) CreateTeam(ctx context.Context, t store.Team) error { return errTODO }

// GetTeam implements store.Identity.
func (s *Store) GetTeam(ctx context.Context, id string) (store.Team, error) {
	return store.Team{}, errTODO
}

// ListTeams implements store.Identity.
func (s *Store) ListTeams(ctx context.Context) ([]store.Team, error) { return nil, errTODO }

// SetMember implements store.Identity.
func (s *Store) SetMember(ctx context.Context, m store.Member) error { return errTODO }

// RemoveMember implements store.Identity.
func (s *Store) RemoveMember(ctx context.Context, teamID, userID string) error { return errTODO }

// Members implements store.Identity.
func (s *Store) Members(ctx context.Context, teamID string) ([]store.Member, error) {
	return nil, errTODO
}

// Memberships implements store.Identity.
func (s *Store) Memberships(ctx context.Context, userID string) ([]store.Member, error) {
	return nil, errTODO
}

// CreateToken implements store.Identity.
func (s *Store) CreateToken(ctx context.Context, t store.Token) error { return errTODO }

// TokenByHash implements store.Identity.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (store.Token, error) {
	return store.Token{}, errTODO
}

// ListTokens implements store.Identity.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]store.Token, error) {
	return nil, errTODO
}

// RevokeToken implements store.Identity.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (store.Token, error) {
	return store.Token{}, errTODO
}

// TouchToken implements store.Identity.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time, addr string) error {
	return errTODO
}

// CreateEnrollToken implements store.Identity.
func (s *Store) CreateEnrollToken(ctx context.Context, t store.EnrollToken) error { return errTODO }

// ConsumeEnrollToken implements store.Identity.
func (s *Store) ConsumeEnrollToken(ctx context.Context, hash []byte, machineID string, now time.Time) (store.EnrollToken, error) {
	return store.EnrollToken{}, errTODO
}

// RecordCertificate implements store.Identity.
func (s *Store) RecordCertificate(ctx context.Context, machineID, serial string, notAfter time.Time) error {
	return errTODO
}

// RevokeMachine implements store.Identity.
func (s *Store) RevokeMachine(ctx context.Context, id string, at time.Time) error { return errTODO }

// DeleteMachine implements store.Identity.
func (s *Store) DeleteMachine(ctx context.Context, id string, at time.Time) error { return errTODO }

// Revocations implements store.Identity.
func (s *Store) Revocations(ctx context.Context) ([]string, []string, error) {
	return nil, nil, errTODO
}

// AllMachines implements store.Identity.
func (s *Store) AllMachines(ctx context.Context) ([]store.Machine, error) { return nil, errTODO }

// AppendAudit implements store.Identity.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEvent) error { return errTODO }

// ListAudit implements store.Identity.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error) {
	return nil, errTODO
}

// Watch implements store.Identity.
func (s *Store) Watch(ctx context.Context, fn func(store.Change)) error { return errTODO }
