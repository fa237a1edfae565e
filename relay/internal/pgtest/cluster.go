package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Cluster is a throwaway PostgreSQL cluster in a temporary directory,
// listening on 127.0.0.1 with trust auth for user postgres. It is tuned for
// tests (fsync off): never keep data in it.
type Cluster struct {
	URL string

	dir   string // holds data/, the unix socket and the log
	bin   string // directory of initdb and pg_ctl
	runAs string // OS user to run the server as; "" is the current one
	opts  string // the server's options (port, socket directory, settings)
}

// binDir finds the directory holding initdb and pg_ctl: the newest
// /usr/lib/postgresql/<version>/bin, else initdb on PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb not found in /usr/lib/postgresql/*/bin or on PATH")
}

// version parses the <version> of /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// StartCluster initialises and starts a cluster on a free port. PostgreSQL
// refuses to run as root, so as root it runs the server as the OS user
// postgres (created by the postgresql package). Stop removes it.
func StartCluster(ctx context.Context) (_ *Cluster, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("running as root needs an OS user postgres to run the server: %w", err)
		}
		c.runAs = "postgres"
	}
	if c.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.runAs != "" {
		if out, err := exec.CommandContext(ctx, "chown", c.runAs, c.dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown %s: %w: %s", c.dir, err, out)
		}
	}
	data := filepath.Join(c.dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c.opts = strings.Join([]string{
		"-p", strconv.Itoa(port), "-k", c.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
	}, " ")
	if out, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", filepath.Join(c.dir, "log"), "-o", c.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return nil, fmt.Errorf("pg_ctl start: %w: %s\n%s", err, out, log)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, nil
}

// Restart stops the server in fast mode (every connection is ended, as in
// an operator's restart or a failover) and starts it again on the same port,
// waiting until it accepts connections.
func (c *Cluster) Restart(ctx context.Context) error {
	data := filepath.Join(c.dir, "data")
	if out, err := c.run(ctx, "pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D", data, "-l", filepath.Join(c.dir, "log"), "-o", c.opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pg_ctl restart: %w: %s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server (immediate mode) and removes the directory.
func (c *Cluster) Stop() error {
	var errs []error
	data := filepath.Join(c.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.run(ctx, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", data); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %w: %s", err, out))
		}
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// run runs one of the cluster's binaries, as runAs when set.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.dir // the postgres user may not be able to enter the test's directory
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
