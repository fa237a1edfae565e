package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
}

// migrate brings the schema up to date in one immediate transaction, so two
// processes opening the same file cannot both apply a migration.
func migrate(ctx context.Context, db *sql.DB) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_version: %w", err)
	}
	var version int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("init schema_version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read schema_version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary supports (%d)", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("apply migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return fmt.Errorf("update schema_version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
