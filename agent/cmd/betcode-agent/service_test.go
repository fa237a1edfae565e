package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenSpec is a service with every kind of word the renderers quote.
var goldenSpec = serviceSpec{
	Binary: "/opt/betcode/bin/betcode-agent",
	Args: []string{"--data-dir", "/home/alice/.local/share/betcode", "--drain-timeout", "45s",
		"--claude-bin", "/home/alice/.npm-global/bin/claude", "--relay", "relay.example.com:8443",
		"--allow", "Bash(go test *)", "--deny", `Read(./.env) & "100%" $HOME`},
	Path:         "/home/alice/.npm-global/bin:/usr/local/bin:/usr/bin:/bin",
	DrainTimeout: 45 * time.Second,
	LogFile:      "/Users/alice/Library/Logs/betcode-agent.log",
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	checkFile(t, filepath.Join("testdata", name), got)
}

// checkFile compares got with the file at path; -update rewrites it.
func checkFile(t *testing.T, path string, got []byte) {
	t.Helper()
	name := filepath.Base(path)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestSystemdUnitGolden(t *testing.T) {
	unit := systemdUnit(goldenSpec)
	checkGolden(t, "betcode-agent.service", unit)
	if !bytes.Contains(unit, []byte("TimeoutStopSec=75s\n")) {
		t.Errorf("stop timeout is not the drain timeout plus %s", stopMargin)
	}
}

func TestLaunchdPlistGolden(t *testing.T) {
	checkGolden(t, launchdLabel+".plist", launchdPlist(goldenSpec))
}

// The examples in deploy/agent are what install-service writes for a user
// alice with the defaults; they must not drift from it.
func TestDeployExamples(t *testing.T) {
	spec := serviceSpec{
		Binary: "/usr/local/bin/betcode-agent",
		Args:   []string{"--data-dir", "/home/alice/.local/share/betcode", "--drain-timeout", "30s", "--claude-bin", "/usr/local/bin/claude"},
		Path:   "/usr/local/bin:/usr/bin:/bin", DrainTimeout: 30 * time.Second,
	}
	dir := filepath.Join("..", "..", "..", "deploy", "agent")
	checkFile(t, filepath.Join(dir, "betcode-agent.service"), systemdUnit(spec))
	spec.Args[1] = "/Users/alice/.local/share/betcode"
	spec.LogFile = "/Users/alice/Library/Logs/betcode-agent.log"
	spec.Path = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"
	spec.Args[5] = "/opt/homebrew/bin/claude"
	checkFile(t, filepath.Join(dir, launchdLabel+".plist"), launchdPlist(spec))
}

// systemd-analyze checks the unit as systemd reads it, when it is here.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is missing: install it (apt-get install systemd; make test-deps does)")
		}
		t.Skip("systemd-analyze is not installed (apt-get install systemd)")
	}
	dir := t.TempDir()
	spec := goldenSpec
	// verify wants an executable that exists.
	spec.Binary, err = os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "betcode-agent.service")
	if err := os.WriteFile(unit, systemdUnit(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sa, "--user", "verify", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run, "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	// verify exits 0 on unknown keys too: any output is a finding.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze --user verify: %v\n%s", err, out)
	}
}

func TestInstallServiceWritesOnceAndPrints(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "cfg"))
	install := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"install-service", "--binary", "/opt/betcode-agent", "--data-dir", filepath.Join(home, "data")}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	tests := []struct {
		name    string
		args    []string
		file    string
		wantOut string // substring of the output
		wantErr string
	}{
		{name: "systemd", args: []string{"--manager", "systemd", "--", "--relay", "relay.example.com:8443"},
			file: filepath.Join(home, "cfg", "systemd", "user", "betcode-agent.service"), wantOut: "systemctl --user daemon-reload && systemctl --user enable --now betcode-agent"},
		{name: "systemd again", args: []string{"--manager", "systemd"}, wantErr: "--force"},
		{name: "systemd forced", args: []string{"--manager", "systemd", "--force", "--drain-timeout", "10s"},
			file: filepath.Join(home, "cfg", "systemd", "user", "betcode-agent.service"), wantOut: "wrote "},
		{name: "launchd", args: []string{"--manager", "launchd"},
			file: filepath.Join(home, "Library", "LaunchAgents", "dev.betcode.agent.plist"), wantOut: "launchctl bootstrap gui/$(id -u)"},
		{name: "print", args: []string{"--manager", "systemd", "--print"}, wantOut: "ExecStart=/opt/betcode-agent serve --data-dir " + filepath.Join(home, "data")},
		{name: "stray argument", args: []string{"relay.example.com:8443"}, wantErr: "after --"},
		{name: "bad manager", args: []string{"--manager", "upstart"}, wantErr: "systemd or launchd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := install(tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("out = %q, err = %v; want %q in the output", out, err, tc.wantOut)
			}
			if tc.file != "" {
				b, err := os.ReadFile(tc.file)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte("/opt/betcode-agent")) {
					t.Errorf("%s does not run the binary:\n%s", tc.file, b)
				}
			}
		})
	}
	b, _ := os.ReadFile(filepath.Join(home, "cfg", "systemd", "user", "betcode-agent.service"))
	if !bytes.Contains(b, []byte("--drain-timeout 10s")) || !bytes.Contains(b, []byte("TimeoutStopSec=40s")) {
		t.Errorf("--force did not rewrite the unit with the new drain timeout:\n%s", b)
	}
}
