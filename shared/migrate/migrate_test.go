package migrate

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func TestApply(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v1 := []string{`CREATE TABLE a (x INTEGER)`}
	v2 := append(v1, `ALTER TABLE a ADD COLUMN y TEXT`)
	steps := []struct {
		name    string
		migs    []string
		wantErr string
	}{
		{"fresh", v1, ""},
		{"again is a no-op", v1, ""},
		{"upgrade", v2, ""},
		{"older binary refuses a newer schema", v1, "newer than this binary"},
	}
	for _, s := range steps {
		err := Apply(ctx, db, s.migs)
		if (err == nil) != (s.wantErr == "") || (err != nil && !strings.Contains(err.Error(), s.wantErr)) {
			t.Fatalf("%s: %v, want %q", s.name, err, s.wantErr)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO a (x, y) VALUES (1, 'z')`); err != nil {
		t.Fatalf("the migrated schema lacks column y: %v", err)
	}
}
