// Package pgtest gives tests a fresh PostgreSQL database.
//
// The server is, in order: $DATABASE_URL; the server on 127.0.0.1:5432
// (user postgres, trust auth); a throwaway cluster started from the
// machine's PostgreSQL binaries (/usr/lib/postgresql/*/bin) in a temporary
// directory. BETCODE_PGTEST_THROWAWAY=1 forces the throwaway cluster.
// Without any of them the test fails with what to install; it never skips.
//
// Each test process creates one uniquely named database on that server
// (betcode_test_<pid>_<random>), and each URL call a fresh schema in it,
// named by the URL's search_path. Main, called from TestMain, drops the
// database and stops a throwaway cluster when the tests end; on the local
// server, databases left by test processes that died are dropped at the
// next run.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Environment variables read by URL.
const (
	EnvURL       = "DATABASE_URL"
	EnvThrowaway = "BETCODE_PGTEST_THROWAWAY"
)

// localURL is the conventional developer and CI server.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=2"

const installHint = "no PostgreSQL for tests: set DATABASE_URL, run a server on 127.0.0.1:5432 " +
	"(user postgres, trust auth), or install the server binaries for a throwaway cluster " +
	"(apt-get install postgresql)"

var (
	mu      sync.Mutex
	inMain  bool
	started bool
	env     *testEnv
	envErr  error
	schemas int
)

// testEnv is the process's database.
type testEnv struct {
	adminURL string   // server's maintenance database
	dbURL    string   // the process's database (or adminURL when it may not create one)
	dbName   string   // "" when no database was created
	schemas  []string // created in adminURL's database when dbName is ""
	conn     *pgx.Conn
	cluster  *Cluster // nil unless throwaway
}

// Main runs the tests, then drops the database created for them and stops
// a throwaway cluster. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with cleanup of its own.
func Run(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// URL returns the URL of a fresh, empty schema (the search_path of the
// URL) in this process's test database.
func URL(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		tb.Fatal("pgtest.URL: call pgtest.Main(m) from the package's TestMain")
	}
	if !started {
		started = true
		env, envErr = setup()
	}
	if envErr != nil {
		tb.Fatalf("pgtest: %v", envErr)
	}
	schemas++
	name := fmt.Sprintf("t%03d_%s", schemas, sanitize(tb.Name()))
	if len(name) > 63 {
		name = name[:63]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	if env.dbName == "" {
		env.schemas = append(env.schemas, name)
	}
	u, err := withParams(env.dbURL, "", map[string]string{"search_path": name})
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return u
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func sanitize(s string) string {
	return strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

// setup finds a server and creates the process's database.
func setup() (*testEnv, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := &testEnv{}
	switch {
	case os.Getenv(EnvThrowaway) == "1":
		c, err := StartCluster(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s=1: %w", EnvThrowaway, err)
		}
		e.cluster, e.adminURL = c, c.URL
	case os.Getenv(EnvURL) != "":
		e.adminURL = os.Getenv(EnvURL)
	case reachable(ctx, localURL):
		e.adminURL = localURL
		// The server is on this host, so the pids in test database names
		// are this host's: drop the databases of test processes that died
		// before Main could (killed by a timeout, say).
		dropStale(ctx, localURL)
	default:
		c, err := StartCluster(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s (throwaway cluster: %v)", installHint, err)
		}
		e.cluster, e.adminURL = c, c.URL
	}
	if err := e.createDatabase(ctx); err != nil {
		return nil, errors.Join(err, e.close(ctx))
	}
	return e, nil
}

func reachable(ctx context.Context, u string) bool {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// dropStale drops betcode_test_<pid>_* databases whose process is gone.
// Best effort: errors are ignored.
func dropStale(ctx context.Context, adminURL string) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'betcode\_test\_%'`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		var pid int
		if _, err := fmt.Sscanf(name, "betcode_test_%d_", &pid); err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		}
	}
}

// createDatabase creates the process's database, or, if the role may not
// create databases, uses the admin database with per-test schemas.
func (e *testEnv) createDatabase(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(e.adminURL), err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("betcode_test_%d_%s", os.Getpid(), hex.EncodeToString(b[:]))
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		e.dbURL = e.adminURL
	case err != nil:
		return fmt.Errorf("create database %s: %w", name, err)
	default:
		e.dbName = name
		if e.dbURL, err = withParams(e.adminURL, name, nil); err != nil {
			return err
		}
	}
	if e.conn, err = pgx.Connect(ctx, e.dbURL); err != nil {
		return fmt.Errorf("connect to test database: %w", err)
	}
	return nil
}

// withParams returns u with its database replaced by db (unless "") and
// the query parameters set.
func withParams(u, db string, params map[string]string) (string, error) {
	cfg, err := url.Parse(u)
	if err != nil || (cfg.Scheme != "postgres" && cfg.Scheme != "postgresql") {
		return "", fmt.Errorf("pgtest needs a postgres:// URL, got %s", redact(u))
	}
	if db != "" {
		cfg.Path = "/" + db
	}
	q := cfg.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	cfg.RawQuery = q.Encode()
	return cfg.String(), nil
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable URL)"
}

func teardown() error {
	mu.Lock()
	defer mu.Unlock()
	if env == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := env.close(ctx)
	env = nil
	return err
}

// close drops what setup created and stops the cluster.
func (e *testEnv) close(ctx context.Context) error {
	var errs []error
	if e.conn != nil {
		for _, s := range e.schemas {
			if _, err := e.conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				errs = append(errs, fmt.Errorf("drop schema %s: %w", s, err))
			}
		}
		errs = append(errs, e.conn.Close(ctx))
	}
	if e.dbName != "" {
		if admin, err := pgx.Connect(ctx, e.adminURL); err != nil {
			errs = append(errs, fmt.Errorf("drop database %s: %w", e.dbName, err))
		} else {
			// FORCE ends connections a test leaked (PostgreSQL 13+).
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.dbName+" WITH (FORCE)"); err != nil {
				errs = append(errs, fmt.Errorf("drop database %s: %w", e.dbName, err))
			}
			errs = append(errs, admin.Close(ctx))
		}
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop())
	}
	return errors.Join(errs...)
}
