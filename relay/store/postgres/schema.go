package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are applied in order; schema_version holds how many have been
// applied. Never edit a released entry: append a new one.
//
// buffered_messages is keyed (machine_id, id), the access path of Pending
// and Ack. Ids come from a sequence, never reused, taken by the writer only
// while it holds the machine's machine_buffer_usage row lock (commit.go).
// There is no index on expires_at: PurgeExpired runs hourly and a scan of
// the buffer is cheaper than maintaining one more index on every insert.
var migrations = []string{
	// 1: machines, current machines, offline buffer.
	`CREATE TABLE machines (
		id              text        PRIMARY KEY,
		owner_id        text        NOT NULL,
		name            text        NOT NULL DEFAULT '',
		hostname        text        NOT NULL DEFAULT '',
		capabilities    text[]      NOT NULL DEFAULT '{}',
		os              text        NOT NULL DEFAULT '',
		arch            text        NOT NULL DEFAULT '',
		version         text        NOT NULL DEFAULT '',
		cpu_cores       bigint      NOT NULL DEFAULT 0,
		memory_bytes    bigint      NOT NULL DEFAULT 0, -- uint64 bits
		disk_free_bytes bigint      NOT NULL DEFAULT 0, -- uint64 bits
		registered_at   timestamptz NOT NULL,
		last_seen       timestamptz NOT NULL
	);
	CREATE INDEX machines_owner ON machines (owner_id, id);

	CREATE TABLE current_machines (
		owner_id   text        PRIMARY KEY,
		machine_id text        NOT NULL,
		updated_at timestamptz NOT NULL
	);

	CREATE SEQUENCE buffered_messages_id_seq;
	CREATE TABLE buffered_messages (
		id              bigint      NOT NULL,
		machine_id      text        NOT NULL,
		owner_id        text        NOT NULL,
		idempotency_key text, -- NULL: not deduplicated
		service         text        NOT NULL,
		method          text        NOT NULL,
		metadata        jsonb       NOT NULL,
		payload         bytea       NOT NULL,
		size            bigint      NOT NULL, -- store.Message.Size, what counts against MaxBytes
		created_at      timestamptz NOT NULL,
		expires_at      timestamptz NOT NULL,
		PRIMARY KEY (machine_id, id)
	);
	ALTER SEQUENCE buffered_messages_id_seq OWNED BY buffered_messages.id;
	CREATE UNIQUE INDEX buffered_messages_key ON buffered_messages (machine_id, idempotency_key)
		WHERE idempotency_key IS NOT NULL;

	-- One row per machine that ever had a message: the buffer's occupancy,
	-- kept by every statement that inserts or deletes messages, and the
	-- lock that serialises them per machine across replicas.
	CREATE TABLE machine_buffer_usage (
		machine_id text   PRIMARY KEY,
		messages   bigint NOT NULL DEFAULT 0,
		bytes      bigint NOT NULL DEFAULT 0
	);` + enqueueFunction,

	// 2: the Enqueue fast path (enqueuefunc.go).
	enqueueFastFunction,

	// 3: the replica holding each machine's tunnel ('' when none).
	`ALTER TABLE machines ADD COLUMN replica text NOT NULL DEFAULT '';`,

	// 4: accounts (store.Identity). Optional times are NULL when zero.
	identitySchema,

	// 5: Web Push (store.Push).
	pushSchema,

	// 6: scoped tokens: a paired device's or a pairing ticket's, for one
	// machine (store.Token.Scope, docs/security.md).
	`ALTER TABLE tokens ADD COLUMN machine_id text NOT NULL DEFAULT '';
	ALTER TABLE tokens ADD COLUMN scope text NOT NULL DEFAULT '';
	CREATE INDEX tokens_machine ON tokens (machine_id) WHERE machine_id <> '';`,
}

// identitySchema is migration 4. Revocations have tables of their own so
// that they outlive the machine's row (DeleteMachine) and a deleted id
// cannot register again. There are no foreign keys: the store checks the
// references it must (SetMember), and a machine's revocation must survive
// its row.
const identitySchema = `
	ALTER TABLE machines ADD COLUMN team_id text NOT NULL DEFAULT ''; -- '': owned by owner_id
	ALTER TABLE machines ADD COLUMN revoked_at timestamptz; -- NULL: not revoked
	CREATE INDEX machines_team ON machines (team_id, id) WHERE team_id <> '';

	CREATE TABLE users (
		id         text        PRIMARY KEY,
		email      text        NOT NULL DEFAULT '',
		admin      boolean     NOT NULL DEFAULT false,
		disabled   boolean     NOT NULL DEFAULT false,
		created_at timestamptz NOT NULL
	);

	CREATE TABLE teams (
		id         text        PRIMARY KEY,
		created_at timestamptz NOT NULL
	);

	CREATE TABLE team_members (
		team_id  text        NOT NULL,
		user_id  text        NOT NULL,
		role     text        NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
		added_at timestamptz NOT NULL,
		PRIMARY KEY (team_id, user_id)
	);
	CREATE INDEX team_members_user ON team_members (user_id, team_id);

	CREATE TABLE tokens (
		id             text        PRIMARY KEY,
		user_id        text        NOT NULL,
		name           text        NOT NULL DEFAULT '',
		hash           bytea       NOT NULL UNIQUE, -- SHA-256 of the token string
		created_at     timestamptz NOT NULL,
		expires_at     timestamptz, -- NULL: never
		last_used_at   timestamptz, -- NULL: never used
		last_used_addr text        NOT NULL DEFAULT '',
		revoked_at     timestamptz  -- NULL: not revoked
	);
	CREATE INDEX tokens_user ON tokens (user_id);

	CREATE TABLE enroll_tokens (
		id         text        PRIMARY KEY,
		hash       bytea       NOT NULL UNIQUE, -- SHA-256 of the token string
		team_id    text        NOT NULL DEFAULT '',
		user_id    text        NOT NULL,
		created_at timestamptz NOT NULL,
		expires_at timestamptz, -- NULL: never
		used_at    timestamptz, -- NULL: not used
		machine_id text        NOT NULL DEFAULT ''
	);

	CREATE TABLE machine_certs (
		serial     text        PRIMARY KEY, -- lower-case hex
		machine_id text        NOT NULL,
		not_after  timestamptz NOT NULL
	);
	CREATE INDEX machine_certs_machine ON machine_certs (machine_id);

	CREATE TABLE revoked_machines (
		machine_id text        PRIMARY KEY,
		revoked_at timestamptz NOT NULL
	);

	CREATE TABLE revoked_certs (
		serial     text        PRIMARY KEY,
		machine_id text        NOT NULL,
		revoked_at timestamptz NOT NULL
	);

	CREATE TABLE audit_events (
		id      bigserial   PRIMARY KEY,
		at      timestamptz NOT NULL,
		actor   text        NOT NULL DEFAULT '',
		action  text        NOT NULL,
		target  text        NOT NULL DEFAULT '',
		remote  text        NOT NULL DEFAULT '',
		outcome text        NOT NULL DEFAULT '',
		detail  text        NOT NULL DEFAULT ''
	);
	CREATE INDEX audit_events_at ON audit_events (at, id);
	CREATE INDEX audit_events_actor ON audit_events (actor, at);
	CREATE INDEX audit_events_target ON audit_events (target, at);`

// pushSchema is migration 5. push_claims is the notifications already sent
// per subscription (ClaimPushKey), pruned by created_at; vapid_keys holds
// one row, the key every replica signs with.
const pushSchema = `
	CREATE TABLE push_subscriptions (
		id          text        PRIMARY KEY,
		user_id     text        NOT NULL,
		endpoint    text        NOT NULL UNIQUE,
		p256dh      text        NOT NULL,
		auth        text        NOT NULL,
		name        text        NOT NULL DEFAULT '',
		kinds       text[]      NOT NULL DEFAULT '{}', -- empty: every kind
		created_at  timestamptz NOT NULL,
		last_status text        NOT NULL DEFAULT '', -- '', sent, failed, expired
		last_at     timestamptz, -- NULL: never attempted
		last_error  text        NOT NULL DEFAULT ''
	);
	CREATE INDEX push_subscriptions_user ON push_subscriptions (user_id, created_at, id);

	CREATE TABLE push_claims (
		subscription_id text        NOT NULL,
		key             text        NOT NULL,
		created_at      timestamptz NOT NULL,
		PRIMARY KEY (subscription_id, key)
	);
	CREATE INDEX push_claims_created ON push_claims (created_at);

	CREATE TABLE vapid_keys (
		id          integer     PRIMARY KEY CHECK (id = 1),
		private_key text        NOT NULL,
		public_key  text        NOT NULL,
		created_at  timestamptz NOT NULL
	);`

// migrationLock is the pg_advisory_xact_lock key that serialises migrations
// of relay replicas starting together ("betcode" in ASCII).
const migrationLock int64 = 0x62657463_6f6465

// migrate brings the schema up to date in one transaction. Replicas starting
// at once queue on the advisory lock; the later ones find nothing to do.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrateTo(ctx, pool, migrations)
}

// migrateTo applies migrations (a prefix of the list, in tests of an
// upgrade).
func migrateTo(ctx context.Context, pool *pgxpool.Pool, migrations []string) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		var version int
		switch err := tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version); {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
				return fmt.Errorf("init schema_version: %w", err)
			}
		case err != nil:
			return fmt.Errorf("read schema_version: %w", err)
		}
		if version > len(migrations) {
			// A newer relay migrated this database: refuse to touch it
			// rather than run on a schema this binary does not know.
			return fmt.Errorf("database schema v%d is newer than this relay knows (v%d): upgrade betcode-relay (docs/upgrading.md)", version, len(migrations))
		}
		for i := version; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("apply migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE schema_version SET version = $1`, len(migrations)); err != nil {
			return fmt.Errorf("update schema_version: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
