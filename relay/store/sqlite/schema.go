package sqlite

import (
	"context"
	"database/sql"

	schema "github.com/betcode-dev/betcode/shared/migrate"
)

// migrations are applied in order; schema_version holds how many have been
// applied. Never edit a released entry: append a new one. The schema
// mirrors store/postgres; times are unix nanoseconds (0 for the zero time),
// lists and maps JSON text.
//
// buffered_messages.id is AUTOINCREMENT so an id is never reused after its
// row is deleted: a reused id could sit behind a reader's cursor.
var migrations = []string{
	// 1: machines, current machines, offline buffer.
	`CREATE TABLE machines (
		id              TEXT    NOT NULL PRIMARY KEY,
		owner_id        TEXT    NOT NULL,
		name            TEXT    NOT NULL DEFAULT '',
		hostname        TEXT    NOT NULL DEFAULT '',
		capabilities    TEXT    NOT NULL DEFAULT '[]',
		os              TEXT    NOT NULL DEFAULT '',
		arch            TEXT    NOT NULL DEFAULT '',
		version         TEXT    NOT NULL DEFAULT '',
		cpu_cores       INTEGER NOT NULL DEFAULT 0,
		memory_bytes    INTEGER NOT NULL DEFAULT 0, -- uint64 bits
		disk_free_bytes INTEGER NOT NULL DEFAULT 0, -- uint64 bits
		registered_at   INTEGER NOT NULL,
		last_seen       INTEGER NOT NULL
	);
	CREATE INDEX machines_owner ON machines (owner_id, id);

	CREATE TABLE current_machines (
		owner_id   TEXT    NOT NULL PRIMARY KEY,
		machine_id TEXT    NOT NULL,
		updated_at INTEGER NOT NULL
	);

	CREATE TABLE buffered_messages (
		id              INTEGER PRIMARY KEY AUTOINCREMENT,
		machine_id      TEXT    NOT NULL,
		owner_id        TEXT    NOT NULL,
		idempotency_key TEXT, -- NULL: not deduplicated
		service         TEXT    NOT NULL,
		method          TEXT    NOT NULL,
		metadata        TEXT    NOT NULL, -- JSON object
		payload         BLOB    NOT NULL,
		size            INTEGER NOT NULL, -- store.Message.Size
		created_at      INTEGER NOT NULL,
		expires_at      INTEGER NOT NULL
	);
	CREATE INDEX buffered_messages_machine ON buffered_messages (machine_id, id);
	CREATE UNIQUE INDEX buffered_messages_key ON buffered_messages (machine_id, idempotency_key)
		WHERE idempotency_key IS NOT NULL;

	CREATE TABLE machine_buffer_usage (
		machine_id TEXT    NOT NULL PRIMARY KEY,
		messages   INTEGER NOT NULL DEFAULT 0,
		bytes      INTEGER NOT NULL DEFAULT 0
	);`,

	// 2: the replica holding each machine's tunnel ('' when none).
	`ALTER TABLE machines ADD COLUMN replica TEXT NOT NULL DEFAULT '';`,

	// 3: accounts (store.Identity) and the change log Watch polls.
	identitySchema,

	// 4: Web Push (store.Push), store/postgres's migration 5.
	pushSchema,

	// 5: scoped tokens (store.Token.Scope), store/postgres's migration 6.
	`ALTER TABLE tokens ADD COLUMN machine_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT '';
	CREATE INDEX tokens_machine ON tokens (machine_id) WHERE machine_id <> '';`,
}

// identitySchema is migration 3, store/postgres's migration 4 plus
// identity_changes: SQLite has no LISTEN/NOTIFY, so a change is a row that
// every process's watchers poll for (watch.go). Optional times are 0 when
// zero.
const identitySchema = `
	ALTER TABLE machines ADD COLUMN team_id TEXT NOT NULL DEFAULT ''; -- '': owned by owner_id
	ALTER TABLE machines ADD COLUMN revoked_at INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX machines_team ON machines (team_id, id) WHERE team_id <> '';

	CREATE TABLE users (
		id         TEXT    NOT NULL PRIMARY KEY,
		email      TEXT    NOT NULL DEFAULT '',
		admin      INTEGER NOT NULL DEFAULT 0, -- bool
		disabled   INTEGER NOT NULL DEFAULT 0, -- bool
		created_at INTEGER NOT NULL
	);

	CREATE TABLE teams (
		id         TEXT    NOT NULL PRIMARY KEY,
		created_at INTEGER NOT NULL
	);

	CREATE TABLE team_members (
		team_id  TEXT    NOT NULL,
		user_id  TEXT    NOT NULL,
		role     TEXT    NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
		added_at INTEGER NOT NULL,
		PRIMARY KEY (team_id, user_id)
	);
	CREATE INDEX team_members_user ON team_members (user_id, team_id);

	CREATE TABLE tokens (
		id             TEXT    NOT NULL PRIMARY KEY,
		user_id        TEXT    NOT NULL,
		name           TEXT    NOT NULL DEFAULT '',
		hash           BLOB    NOT NULL UNIQUE, -- SHA-256 of the token string
		created_at     INTEGER NOT NULL,
		expires_at     INTEGER NOT NULL DEFAULT 0,
		last_used_at   INTEGER NOT NULL DEFAULT 0,
		last_used_addr TEXT    NOT NULL DEFAULT '',
		revoked_at     INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX tokens_user ON tokens (user_id);

	CREATE TABLE enroll_tokens (
		id         TEXT    NOT NULL PRIMARY KEY,
		hash       BLOB    NOT NULL UNIQUE, -- SHA-256 of the token string
		team_id    TEXT    NOT NULL DEFAULT '',
		user_id    TEXT    NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL DEFAULT 0,
		used_at    INTEGER NOT NULL DEFAULT 0,
		machine_id TEXT    NOT NULL DEFAULT ''
	);

	CREATE TABLE machine_certs (
		serial     TEXT    NOT NULL PRIMARY KEY, -- lower-case hex
		machine_id TEXT    NOT NULL,
		not_after  INTEGER NOT NULL
	);
	CREATE INDEX machine_certs_machine ON machine_certs (machine_id);

	CREATE TABLE revoked_machines (
		machine_id TEXT    NOT NULL PRIMARY KEY,
		revoked_at INTEGER NOT NULL
	);

	CREATE TABLE revoked_certs (
		serial     TEXT    NOT NULL PRIMARY KEY,
		machine_id TEXT    NOT NULL,
		revoked_at INTEGER NOT NULL
	);

	CREATE TABLE audit_events (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		at      INTEGER NOT NULL,
		actor   TEXT    NOT NULL DEFAULT '',
		action  TEXT    NOT NULL,
		target  TEXT    NOT NULL DEFAULT '',
		remote  TEXT    NOT NULL DEFAULT '',
		outcome TEXT    NOT NULL DEFAULT '',
		detail  TEXT    NOT NULL DEFAULT ''
	);
	CREATE INDEX audit_events_at ON audit_events (at, id);
	CREATE INDEX audit_events_actor ON audit_events (actor, at);
	CREATE INDEX audit_events_target ON audit_events (target, at);

	-- AUTOINCREMENT: ids are never reused, so a watcher's cursor never
	-- skips a change; writers are serialised, so ids follow commit order.
	CREATE TABLE identity_changes (
		id   INTEGER PRIMARY KEY AUTOINCREMENT,
		kind TEXT    NOT NULL,
		ref  TEXT    NOT NULL,
		at   INTEGER NOT NULL
	);`

// pushSchema is migration 4, as store/postgres's migration 5; kinds is a
// JSON list.
const pushSchema = `
	CREATE TABLE push_subscriptions (
		id          TEXT    NOT NULL PRIMARY KEY,
		user_id     TEXT    NOT NULL,
		endpoint    TEXT    NOT NULL UNIQUE,
		p256dh      TEXT    NOT NULL,
		auth        TEXT    NOT NULL,
		name        TEXT    NOT NULL DEFAULT '',
		kinds       TEXT    NOT NULL DEFAULT '[]', -- empty: every kind
		created_at  INTEGER NOT NULL,
		last_status TEXT    NOT NULL DEFAULT '', -- '', sent, failed, expired
		last_at     INTEGER NOT NULL DEFAULT 0,
		last_error  TEXT    NOT NULL DEFAULT ''
	);
	CREATE INDEX push_subscriptions_user ON push_subscriptions (user_id, created_at, id);

	CREATE TABLE push_claims (
		subscription_id TEXT    NOT NULL,
		key             TEXT    NOT NULL,
		created_at      INTEGER NOT NULL,
		PRIMARY KEY (subscription_id, key)
	);
	CREATE INDEX push_claims_created ON push_claims (created_at);

	CREATE TABLE vapid_keys (
		id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
		private_key TEXT    NOT NULL,
		public_key  TEXT    NOT NULL,
		created_at  INTEGER NOT NULL
	);`

// migrate brings the schema up to date.
func migrate(ctx context.Context, db *sql.DB) error {
	return schema.Apply(ctx, db, migrations)
}
