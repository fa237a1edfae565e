// Package admin implements the relay's administration: users, teams and
// their roles, client tokens, join tokens, machines and the audit log, with
// the authorization rules of docs/admin.md. The gRPC AdminService
// (relay/adminsvc) and the `betcode-relay admin` command are two front ends
// over the same Ops, so both allow, refuse and word errors alike.
//
// Every method takes the Actor it acts for and returns errors as gRPC
// statuses (codes.InvalidArgument naming the field, codes.NotFound for what
// the actor may not see, codes.PermissionDenied for what the actor sees but
// lacks the role for). Every change and every refusal is appended to the
// store's audit log.
package admin

import (
	"log/slog"
	"time"

	"github.com/betcode-dev/betcode/relay/store"
)

// CLIActor is the audit Actor of the admin command, which works on the store
// directly.
const CLIActor = "admin-cli"

// Actor is who an operation acts for: an authenticated user, or the admin
// command (CLI), which has every right: whoever holds the database holds
// everything anyway.
type Actor struct {
	// UserID is the authenticated user ("" for the CLI).
	UserID string
	// Admin: the user is a relay administrator. Ops also re-reads the user
	// and requires both, so a cached identity never widens rights.
	Admin bool
	// CLI: the admin command; UserID and Admin are ignored.
	CLI bool
	// Remote is the caller's address, recorded in the audit log.
	Remote string
	// Via says how the actor was authenticated when that is not a client
	// token (e.g. "OIDC from https://idp.example.com"); the audit detail
	// of a successful change ends with it.
	Via string

	// system names a relay component acting with the CLI's rights (System).
	system string
}

// CLI is the Actor of the admin command.
func CLI() Actor { return Actor{CLI: true} }

// System is the Actor of a relay component that acts on its own authority
// with every right, as the admin command does: e.g. sign-in adding a user to
// the teams their identity provider lists. name is its audit actor (e.g.
// "oidc").
func System(name string) Actor { return Actor{CLI: true, system: name} }

// name is a's audit Actor.
func (a Actor) name() string {
	switch {
	case a.system != "":
		return a.system
	case a.CLI:
		return CLIActor
	}
	return a.UserID
}

// Ops are the administration operations over a store. The zero Now and Log
// are time.Now and a discarding logger.
type Ops struct {
	Store store.Store
	// Now is the clock.
	Now func() time.Time
	// Log receives failures to write the audit log.
	Log *slog.Logger
}

func (o *Ops) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Ops) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}
