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
}

// migrate brings the schema up to date.
func migrate(ctx context.Context, db *sql.DB) error {
	return schema.Apply(ctx, db, migrations)
}
