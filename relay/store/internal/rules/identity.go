package rules

import (
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// DefaultAuditLimit is how many events ListAudit returns when the filter
// sets no Limit.
const DefaultAuditLimit = 1000

// MaxAuditLimit caps AuditFilter.Limit, so that one call cannot read the
// whole log into memory.
const MaxAuditLimit = 100_000

// ID validates a required identifier: not empty, valid UTF-8, no NUL.
func ID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s is required", store.ErrInvalid, what)
	}
	return texts(what, id)
}

// Hash validates a token hash: a SHA-256 digest. Anything else is a
// caller's bug (a secret passed where its hash belongs, say), never a
// token that could match.
func Hash(h []byte) error {
	if len(h) != sha256.Size {
		return fmt.Errorf("%w: token hash of %d bytes, want a %d-byte SHA-256", store.ErrInvalid, len(h), sha256.Size)
	}
	return nil
}

// Time returns t, or now when t is zero: the stores' rule for every time
// argument ("a zero time means now").
func Time(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t
}

// User validates u and fills a zero CreatedAt with now.
func User(u *store.User, now time.Time) error {
	if err := ID("user id", u.ID); err != nil {
		return err
	}
	if err := texts("user email", u.Email); err != nil {
		return err
	}
	u.CreatedAt = Time(u.CreatedAt, now)
	return nil
}

// Team validates t and fills a zero CreatedAt with now.
func Team(t *store.Team, now time.Time) error {
	if err := ID("team id", t.ID); err != nil {
		return err
	}
	t.CreatedAt = Time(t.CreatedAt, now)
	return nil
}

// Member validates m and fills a zero AddedAt with now.
func Member(m *store.Member, now time.Time) error {
	if err := ID("team id", m.TeamID); err != nil {
		return err
	}
	if err := ID("user id", m.UserID); err != nil {
		return err
	}
	if !m.Role.Valid() {
		return fmt.Errorf("%w: role %q", store.ErrInvalid, m.Role)
	}
	m.AddedAt = Time(m.AddedAt, now)
	return nil
}

// Token validates t and fills a zero CreatedAt with now. The other times
// keep zero as "never".
func Token(t *store.Token, now time.Time) error {
	if err := ID("token id", t.ID); err != nil {
		return err
	}
	if err := ID("token user id", t.UserID); err != nil {
		return err
	}
	if err := texts("token field", t.Name, t.LastUsedAddr); err != nil {
		return err
	}
	if err := Hash(t.Hash); err != nil {
		return err
	}
	switch {
	case t.Scope == "" && t.MachineID == "":
	case (t.Scope == store.ScopeDevice || t.Scope == store.ScopePair || t.Scope == store.ScopeShare) && t.MachineID != "":
		if err := ID("token machine id", t.MachineID); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: token scope %q for machine %q", store.ErrInvalid, t.Scope, t.MachineID)
	}
	t.CreatedAt = Time(t.CreatedAt, now)
	return nil
}

// EnrollToken validates t, fills a zero CreatedAt with now, and clears the
// fields that only consuming it sets.
func EnrollToken(t *store.EnrollToken, now time.Time) error {
	if err := ID("join token id", t.ID); err != nil {
		return err
	}
	if err := ID("join token user id", t.UserID); err != nil {
		return err
	}
	if err := texts("join token team id", t.TeamID); err != nil {
		return err
	}
	if err := Hash(t.Hash); err != nil {
		return err
	}
	t.CreatedAt = Time(t.CreatedAt, now)
	t.UsedAt, t.MachineID = time.Time{}, ""
	return nil
}

// Serial validates a certificate serial: lower-case hex, as the CA
// formats it, so that one serial has one spelling in the revocation list.
func Serial(serial string) error {
	if serial == "" {
		return fmt.Errorf("%w: certificate serial is required", store.ErrInvalid)
	}
	for _, c := range serial {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: certificate serial %q is not lower-case hex", store.ErrInvalid, serial)
		}
	}
	return nil
}

// Audit validates e and fills a zero At with now.
func Audit(e *store.AuditEvent, now time.Time) error {
	if err := ID("audit action", e.Action); err != nil {
		return err
	}
	if err := texts("audit field", e.Actor, e.Target, e.Remote, e.Outcome, e.Detail); err != nil {
		return err
	}
	e.At = Time(e.At, now)
	e.ID = 0
	return nil
}

// AuditFilter validates f and applies the default Limit.
func AuditFilter(f *store.AuditFilter) error {
	if f.Limit < 0 || f.Limit > MaxAuditLimit {
		return fmt.Errorf("%w: audit limit %d, want 0 to %d", store.ErrInvalid, f.Limit, MaxAuditLimit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultAuditLimit
	}
	return texts("audit actor", f.Actor)
}

// Change rebuilds a published change from its kind and id. An unknown
// kind (published by a newer binary sharing the store) becomes ChangeAll:
// dropping every cache is always safe.
func Change(kind, id string) store.Change {
	switch k := store.ChangeKind(kind); k {
	case store.ChangeToken, store.ChangeUser, store.ChangeMembership, store.ChangeMachine:
		return store.Change{Kind: k, ID: id}
	}
	return store.Change{Kind: store.ChangeAll}
}
