package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestURL checks that two URLs are separate, empty schemas of one database.
func TestURL(t *testing.T) {
	ctx := t.Context()
	a, b := URL(t), URL(t)
	for _, u := range []string{a, b} {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE x (v int)`); err != nil {
			t.Fatalf("create table in %s: %v", u, err)
		}
	}
	pa, _ := url.Parse(a)
	pb, _ := url.Parse(b)
	if pa.Path != pb.Path || pa.Query().Get("search_path") == pb.Query().Get("search_path") {
		t.Errorf("URLs %s and %s: want one database, two schemas", a, b)
	}
}

// TestThrowawayCluster starts and stops a cluster from the machine's
// binaries, the fallback when no server is reachable, so that CI (which
// has a server) exercises it too.
func TestThrowawayCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := StartCluster(ctx)
	if err != nil {
		t.Fatalf("start throwaway cluster (%s): %v", installHint, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil || fsync != "off" {
		t.Errorf("SHOW fsync = %q, %v; want off", fsync, err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	// Restart ends the open connection and serves the same data again on
	// the same URL.
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection opened before Restart still works after it")
	}
	conn.Close(ctx)
	conn, err = pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatalf("connect after Restart: %v", err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 7 {
		t.Errorf("after Restart, SELECT v FROM kept = %d, %v; want 7", v, err)
	}
	conn.Close(ctx)
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still exists: %v", c.dir, err)
	}
	if _, err := pgx.Connect(ctx, c.URL+"&connect_timeout=1"); err == nil {
		t.Error("server still accepts connections after Stop")
	}
}
