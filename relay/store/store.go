// Package store defines the relay's persistent state: registered machines,
// each user's current machine, the offline buffer of requests waiting for a
// machine to reconnect, and the accounts (Identity, identity.go).
//
// The buffer gives exactly-once delivery together with the agent:
//
//   - Enqueue is idempotent on (machine, idempotency key): a client that
//     retries after a relay crash or a lost reply gets the first id back and
//     no second row is stored.
//   - Pending returns a machine's unexpired messages in id order, which is
//     arrival order per machine. Ids are assigned under a per-machine lock,
//     so a message committed later never has a smaller id than one already
//     visible, and a cursor (afterID) never skips a row.
//   - Rows are deleted only by Ack, after the agent confirmed it processed
//     them. A crash between delivery and Ack repeats delivery; the agent
//     dedupes by idempotency key, so it does not repeat the effect.
//
// Implementations: store/postgres (several relay replicas, group commit) and
// store/sqlite (a single relay process). Both pass store/storetest.
// docs/relay-store.md describes the schema, the design and the benchmarks.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrNotFound: no such machine, user, team, membership or token.
	ErrNotFound = errors.New("not found")
	// ErrBufferFull: Enqueue would take the machine past Limits. The relay
	// answers RESOURCE_EXHAUSTED.
	ErrBufferFull = errors.New("offline buffer full")
	// ErrConflict: UpsertMachine for a machine id registered to another
	// owner or team.
	ErrConflict = errors.New("machine registered to another owner")
	// ErrInvalid: an argument the store cannot hold (empty id, a string
	// that is not UTF-8 or contains NUL). The relay answers INVALID_ARGUMENT.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store closed")
)

// Machine is a registered developer machine. IDs are global (the machine's
// certificate name). A machine belongs to user OwnerID or, when TeamID is
// set, to team TeamID (OwnerID is then the user who enrolled it).
type Machine struct {
	ID, OwnerID, TeamID, Name, Hostname string
	Capabilities                        []string
	OS, Arch, Version                   string
	CPUCores                            uint32
	MemoryBytes, DiskFreeBytes          uint64
	RegisteredAt, LastSeen              time.Time
	// Replica is the address of the relay replica holding the machine's
	// tunnel ("" when none). It is live only while LastSeen is fresh: a
	// crashed replica never clears it.
	Replica string
	// RevokedAt is when the machine was revoked (zero: it is not).
	RevokedAt time.Time
}

// LiveReplica returns the replica holding m's tunnel, or "" when none is
// recorded or m was last seen more than ttl before now (the replica that
// recorded it may have crashed without clearing it).
func (m *Machine) LiveReplica(now time.Time, ttl time.Duration) string {
	if m.Replica == "" || now.Sub(m.LastSeen) > ttl {
		return ""
	}
	return m.Replica
}

// Message is one buffered request for an offline machine. ID is assigned by
// Enqueue and increases in arrival order. An empty IdempotencyKey disables
// deduplication for that message.
type Message struct {
	ID                                                  int64
	MachineID, OwnerID, IdempotencyKey, Service, Method string
	Metadata                                            map[string]string
	Payload                                             []byte
	CreatedAt, ExpiresAt                                time.Time
}

// Size is what a message counts against Limits.MaxBytes: its payload plus
// its metadata keys and values.
func (m *Message) Size() int64 {
	n := int64(len(m.Payload))
	for k, v := range m.Metadata {
		n += int64(len(k) + len(v))
	}
	return n
}

// Limits bound one machine's buffer. Zero fields take the Default* values.
type Limits struct {
	MaxMessages int
	MaxBytes    int64
	// TTL sets ExpiresAt = CreatedAt + TTL for messages enqueued without
	// an ExpiresAt.
	TTL time.Duration
}

// Defaults for zero Limits fields.
const (
	DefaultMaxMessages = 1000
	DefaultMaxBytes    = 16 << 20
	DefaultTTL         = 7 * 24 * time.Hour
)

// Validate reports negative limits.
func (l Limits) Validate() error {
	if l.MaxMessages < 0 || l.MaxBytes < 0 || l.TTL < 0 {
		return fmt.Errorf("%w: negative buffer limits %+v", ErrInvalid, l)
	}
	return nil
}

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessages == 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.TTL == 0 {
		l.TTL = DefaultTTL
	}
	return l
}

// BufferStat is the offline buffer's depth for one class of machines and
// the arrival time of its oldest unexpired message (zero if none).
type BufferStat struct {
	Messages int
	Oldest   time.Time
}

// Store is the relay's persistent state. Implementations are safe for
// concurrent use.
type Store interface {
	// UpsertMachine registers m or updates its details; an existing row
	// keeps its RegisteredAt, OwnerID and TeamID. A zero RegisteredAt or
	// LastSeen means now. An id registered to another owner (OwnerID or
	// TeamID differ) gives ErrConflict; a revoked id gives ErrRevoked.
	UpsertMachine(ctx context.Context, m Machine) error
	// TouchMachine records that machine id was seen at seen.
	TouchMachine(ctx context.Context, id string, seen time.Time) error
	// SetMachineReplica records that replica (its advertised address)
	// holds machine id's tunnel, seen at seen.
	SetMachineReplica(ctx context.Context, id, replica string, seen time.Time) error
	// ClearMachineReplica forgets machine id's replica if it is still
	// replica (a newer tunnel on another replica stays recorded).
	ClearMachineReplica(ctx context.Context, id, replica string) error
	// GetMachine returns machine id whoever owns it (callers authorize),
	// or ErrNotFound.
	GetMachine(ctx context.Context, id string) (Machine, error)
	// ListMachines returns the machines userID may reach, ordered by id:
	// those it owns and those of the teams it is a member of. Revoked
	// machines are left out.
	ListMachines(ctx context.Context, userID string) ([]Machine, error)

	// SetCurrentMachine makes machineID (which must exist, else
	// ErrNotFound; "" clears) userID's current machine and returns the
	// previous one ("" when none). The caller authorizes.
	SetCurrentMachine(ctx context.Context, userID, machineID string) (previous string, err error)
	// CurrentMachine returns ownerID's current machine, "" when none.
	CurrentMachine(ctx context.Context, ownerID string) (string, error)

	// Enqueue stores m for m.MachineID. It is idempotent on (MachineID,
	// IdempotencyKey) while the first message is buffered: a repeat returns
	// the first id and duplicate=true and stores nothing. A message that
	// would take the machine past lim fails with an error wrapping
	// ErrBufferFull. A zero CreatedAt means now; a zero ExpiresAt means
	// CreatedAt + lim.TTL. If ctx ends while the message is being
	// committed, Enqueue returns ctx's error and the message may or may not
	// be stored; retrying with the same key is safe.
	Enqueue(ctx context.Context, m Message, lim Limits) (id int64, duplicate bool, err error)
	// Pending returns up to limit unexpired messages of machineID with
	// ids greater than afterID, in id (arrival) order.
	Pending(ctx context.Context, machineID string, afterID int64, limit int) ([]Message, error)
	// Ack deletes delivered messages of machineID; unknown ids are ignored.
	Ack(ctx context.Context, machineID string, ids ...int64) error
	// Counts returns how many messages and bytes machineID's buffer holds,
	// including expired ones not yet purged.
	Counts(ctx context.Context, machineID string) (messages int, bytes int64, err error)
	// PurgeExpired deletes the messages that expired at or before now and
	// returns how many.
	PurgeExpired(ctx context.Context, now time.Time) (int, error)

	// Identity holds users, teams, tokens, revocations and the audit log.
	Identity
	// Push holds Web Push subscriptions, their deduplication claims and
	// the VAPID key (push.go).
	Push

	// Close commits what was already submitted and releases the store.
	// It is idempotent.
	Close() error
}
