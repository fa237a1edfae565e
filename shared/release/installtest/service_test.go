package installtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/shared/release"
)

// TestInstallServicePairs is the README's one command on a fresh machine:
// install.sh --service, as a new user, with a relay's address, its CA and a
// join token in BETCODE_JOIN_TOKEN, ends with the agent enrolled and
// running as that user and a device paired with the code it printed; the
// device then reaches the machine through the relay, end to end.
//
// There is no systemd here (no PID 1, no user manager): install.sh writes
// the unit (checked with systemd-analyze verify), finds no `systemctl
// --user`, says so and starts the agent in the background itself; that
// fallback is what runs here.
func TestInstallServicePairs(t *testing.T) {
	r := v1(t)
	url := serve(t, r.dir)
	u := newUser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()

	// A relay built by the release itself, on loopback, SQLite store.
	relayBin := extract(t, r, "betcode-relay")
	pki := filepath.Join(t.TempDir(), "pki")
	must(t)(exec.CommandContext(ctx, relayBin, "certs", "init", "--dir", pki, "--hosts", "127.0.0.1,localhost").CombinedOutput())
	ca := copyShared(t, filepath.Join(pki, "ca.crt"), "relay-ca-"+u.name+".crt")
	data := t.TempDir()
	relayAddr := startRelay(t, relayBin, pki, data)
	admin := func(args ...string) string {
		return strings.TrimSpace(must(t)(exec.CommandContext(ctx, relayBin, append([]string{"admin", "--data-dir", data}, args...)...).Output()))
	}
	admin("user", "create", "alice")
	admin("team", "create", "eng", "--owner", "alice")
	join := admin("enroll-token", "create", "--team", "eng", "--ttl", "10m")

	// The one command, as the fresh user.
	env := []string{"BETCODE_JOIN_TOKEN=" + join, "PATH=" + fakeClaude(t) + ":/usr/local/bin:/usr/bin:/bin"}
	install := u.command(ctx, env, "sh", installScript(), "--base-url", url, "--allowed-signers", r.signers,
		"--service", "--relay", relayAddr, "--relay-ca", ca, "--name", "fresh-debian")
	stdout, err := install.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	install.Stderr = &stderr
	if err := install.Start(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(u.home, ".local", "state", "betcode", "agent.pid")
	t.Cleanup(func() { stopAgent(t, pidFile) })
	var out strings.Builder
	code := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if m := pairCodeLine.FindStringSubmatch(sc.Text()); m != nil {
			code = m[1]
			break
		}
	}
	if code == "" {
		install.Wait()
		t.Fatalf("install.sh --service printed no pairing code:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
	t.Logf("install.sh to a pairing code: %s", time.Since(start).Round(time.Millisecond))

	// The device: here the same user's betcode, as on a laptop.
	paired := must(t)(u.command(ctx, nil, u.bin("betcode"), "pair", code, "--relay-ca", ca, "--name", "laptop").CombinedOutput())
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	if err := install.Wait(); err != nil {
		t.Fatalf("install.sh --service: %v\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	t.Logf("install.sh --service output:\n%s", out.String())
	for _, want := range []string{"enrolled as machine", "No user service manager answers here", "paired: laptop"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("install.sh --service's output lacks %q", want)
		}
	}
	t.Logf("betcode pair: %s", paired)

	// The device reaches the machine through the relay, end to end.
	sessions := must(t)(u.command(ctx, nil, u.bin("betcode"), "sessions").CombinedOutput())
	t.Logf("betcode sessions: %s", sessions)
	devices := must(t)(u.command(ctx, nil, u.bin("betcode-agent"), "devices", "list").CombinedOutput())
	if !strings.Contains(devices, "laptop") {
		t.Errorf("betcode-agent devices list does not show the paired laptop:\n%s", devices)
	}

	// The unit install-service wrote runs this agent, and systemd accepts it.
	unit := filepath.Join(u.home, ".config", "systemd", "user", "betcode-agent.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatalf("install.sh --service wrote no unit: %v", err)
	}
	wantExec := "ExecStart=" + u.bin("betcode-agent") + " serve --data-dir " + filepath.Join(u.home, ".local", "share", "betcode")
	if !strings.Contains(string(b), wantExec) {
		t.Errorf("the unit lacks %q:\n%s", wantExec, b)
	}
	verifyUnit(t, u, unit)
	t.Logf("one command to a paired agent, checked: %s", time.Since(start).Round(time.Millisecond))
}

// The lines the tests wait for: install.sh's pairing code, the relay's
// address.
var (
	pairCodeLine     = regexp.MustCompile(`betcode pair (betcode-pair:\S+)`)
	relayServingLine = regexp.MustCompile(`relay serving.* addr=(\S+)`)
)

// extract unpacks a binary of the release into a directory of its own
// (with tar: gunzip under the race detector is slow).
func extract(t *testing.T, r built, name string) string {
	t.Helper()
	a := filepath.Join(r.dir, release.ArchiveName(name, r.version, "linux", "amd64"))
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", a, "-C", dir, name).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s: %v\n%s", a, err, out)
	}
	return filepath.Join(dir, name)
}

// startRelay runs betcode-relay serve on 127.0.0.1:0 until the test ends
// and returns its address.
func startRelay(t *testing.T, bin, pki, data string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(pki, "relay.crt"),
		"--tls-key", filepath.Join(pki, "relay.key"), "--client-ca", filepath.Join(pki, "ca.crt"),
		"--ca-key", filepath.Join(pki, "ca.key"), "--data-dir", data)
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		sent := false
		for sc.Scan() {
			if m := relayServingLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the relay exited before serving")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not log \"relay serving\" within 30 s")
	}
	return ""
}

// stopAgent ends the agent install.sh started in the background (its pid
// file) and waits until it is gone.
func stopAgent(t *testing.T, pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	terminate(t, pid, 20*time.Second)
}

// verifyUnit runs systemd-analyze --user verify on the unit, as the user.
func verifyUnit(t *testing.T, u freshUser, unit string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze is missing: apt-get install systemd (make test-deps does)")
	}
	run := filepath.Join(u.home, ".run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run, int(u.uid), int(u.gid)); err != nil {
		t.Fatal(err)
	}
	out, err := u.command(context.Background(), []string{"XDG_RUNTIME_DIR=" + run, "SYSTEMD_LOG_LEVEL=notice"},
		"systemd-analyze", "--user", "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze --user verify %s: %v\n%s", unit, err, out)
	}
}

// TestDarwinDryRun runs install.sh with a uname that says macOS on arm64
// against a release with darwin/arm64 archives: it picks them, verifies
// them and says what it would install and which launchd agent it would
// load, installing nothing.
func TestDarwinDryRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	rel := filepath.Join(dir, "release")
	if err := os.Mkdir(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	sums := release.Checksums{}
	for _, b := range []string{"betcode-agent", "betcode"} {
		name := release.ArchiveName(b, "v9.2.0", "darwin", "arm64")
		var buf bytes.Buffer
		if err := release.WriteArchive(&buf, "darwin", []release.File{{Name: b, Mode: 0o755, Data: []byte("#!/bin/sh\necho mac\n")}}, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(rel, name), buf.Bytes(), 0o644)
		sums[name] = sha(buf.Bytes())
	}
	os.WriteFile(filepath.Join(rel, "checksums.txt"), sums.Format(), 0o644)
	line, err := release.DevKey(ctx, filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	signers := filepath.Join(dir, "allowed_signers")
	os.WriteFile(signers, line, 0o644)
	if err := release.Sign(ctx, filepath.Join(dir, "key"), filepath.Join(rel, "checksums.txt")); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "fakebin")
	os.Mkdir(fake, 0o755)
	os.WriteFile(filepath.Join(fake, "uname"), []byte("#!/bin/sh\ncase $1 in -s) echo Darwin ;; -m) echo arm64 ;; *) echo Darwin ;; esac\n"), 0o755)
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	cmd := exec.CommandContext(ctx, "sh", installScript(), "--base-url", serve(t, rel), "--allowed-signers", signers, "--dry-run", "--service")
	cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+fake+":"+os.Getenv("PATH"))
	out := must(t)(cmd.CombinedOutput())
	for _, want := range []string{"darwin/arm64", "betcode-agent_v9.2.0_darwin_arm64.tar.gz: SHA-256 matches",
		"would install betcode-agent and betcode v9.2.0 (darwin/arm64)", "Library/LaunchAgents/dev.betcode.agent.plist", "launchctl bootstrap"} {
		if !strings.Contains(out, want) {
			t.Errorf("the darwin dry run's output lacks %q:\n%s", want, out)
		}
	}
	if ents, _ := os.ReadDir(home); len(ents) > 0 {
		t.Errorf("a dry run wrote into the home: %v", ents)
	}
}

// TestLaunchdPlistValid has the released agent write its launchd plist
// (install-service --manager launchd, as on a Mac) and checks it the way
// plutil -lint would: well-formed XML, the plist DTD's structure (a dict of
// key/value pairs, values of the DTD's types) and the keys launchd needs.
func TestLaunchdPlistValid(t *testing.T) {
	r := v1(t)
	agent := extract(t, r, "betcode-agent")
	home := t.TempDir()
	cmd := exec.Command(agent, "install-service", "--manager", "launchd", "--print", "--binary", "/Users/alice/.local/bin/betcode-agent",
		"--data-dir", "/Users/alice/Library/Application Support/betcode")
	cmd.Env = append(os.Environ(), "HOME="+home)
	out := must(t)(cmd.Output())
	top, err := parsePlist([]byte(out))
	if err != nil {
		t.Fatalf("the launchd plist is not a valid property list: %v\n%s", err, out)
	}
	d, ok := top.(map[string]any)
	if !ok {
		t.Fatalf("the plist's top level is %T, want a dict", top)
	}
	if d["Label"] != "dev.betcode.agent" {
		t.Errorf("Label = %v", d["Label"])
	}
	args, _ := d["ProgramArguments"].([]any)
	if len(args) < 2 || args[0] != "/Users/alice/.local/bin/betcode-agent" || args[1] != "serve" {
		t.Errorf("ProgramArguments = %v, want the agent's path then serve", args)
	}
	if d["RunAtLoad"] != true {
		t.Errorf("RunAtLoad = %v, want true", d["RunAtLoad"])
	}
	if _, ok := d["KeepAlive"].(map[string]any); !ok {
		t.Errorf("KeepAlive = %v, want a dict", d["KeepAlive"])
	}
}

// parsePlist decodes an XML property list (Apple's PropertyList-1.0 DTD)
// into Go values, refusing anything the DTD does not allow.
func parsePlist(b []byte) (any, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	var root *xml.StartElement
	for root == nil {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("no <plist> element: %w", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			e := tk.Copy()
			root = &e
		case xml.Directive:
			if !bytes.Contains(tk, []byte(`"-//Apple//DTD PLIST 1.0//EN"`)) {
				return nil, fmt.Errorf("DOCTYPE %q is not Apple's plist DTD", tk)
			}
		}
	}
	if root.Name.Local != "plist" {
		return nil, fmt.Errorf("root element <%s>, want <plist>", root.Name.Local)
	}
	v, end, err := plistValue(dec)
	if err != nil || end {
		return nil, fmt.Errorf("<plist> must hold one value: %v", err)
	}
	if _, end, err := plistValue(dec); !end || err != nil {
		return nil, fmt.Errorf("<plist> holds more than one value (%v)", err)
	}
	return v, nil
}

// plistValue reads the next value; end reports the parent's end tag.
func plistValue(dec *xml.Decoder) (v any, end bool, err error) {
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, false, err
		}
		switch tk := tok.(type) {
		case xml.EndElement:
			return nil, true, nil
		case xml.CharData:
			if len(bytes.TrimSpace(tk)) > 0 {
				return nil, false, fmt.Errorf("stray text %q", tk)
			}
		case xml.StartElement:
			switch tk.Name.Local {
			case "string", "integer", "real", "date", "data":
				var s string
				if err := dec.DecodeElement(&s, &tk); err != nil {
					return nil, false, err
				}
				if tk.Name.Local == "integer" {
					if _, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil {
						return nil, false, fmt.Errorf("<integer>%s</integer>: %w", s, err)
					}
				}
				return s, false, nil
			case "true", "false":
				if err := dec.Skip(); err != nil {
					return nil, false, err
				}
				return tk.Name.Local == "true", false, nil
			case "array":
				var a []any
				for {
					v, end, err := plistValue(dec)
					if err != nil {
						return nil, false, err
					}
					if end {
						return a, false, nil
					}
					a = append(a, v)
				}
			case "dict":
				d := map[string]any{}
				for {
					k, end, err := plistValue(dec)
					if err != nil {
						return nil, false, err
					}
					if end {
						return d, false, nil
					}
					key, ok := k.(plistKey)
					if !ok {
						return nil, false, fmt.Errorf("a <dict> holds %v where a <key> belongs", k)
					}
					v, end, err := plistValue(dec)
					if err != nil || end {
						return nil, false, fmt.Errorf("<key>%s</key> has no value", key)
					}
					if _, ok := v.(plistKey); ok {
						return nil, false, fmt.Errorf("<key>%s</key> is followed by another key", key)
					}
					if _, dup := d[string(key)]; dup {
						return nil, false, fmt.Errorf("<key>%s</key> twice", key)
					}
					d[string(key)] = v
				}
			case "key":
				var s string
				if err := dec.DecodeElement(&s, &tk); err != nil {
					return nil, false, err
				}
				return plistKey(s), false, nil
			default:
				return nil, false, fmt.Errorf("<%s> is not a plist element", tk.Name.Local)
			}
		}
	}
}

// plistKey is a <key> read by plistValue.
type plistKey string
