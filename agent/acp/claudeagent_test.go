package acp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindClaudeAgent(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude-agent-acp")
	must(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))

	t.Setenv(ClaudeAgentBinEnv, exe)
	if got, err := FindClaudeAgent(); err != nil || got != exe {
		t.Errorf("FindClaudeAgent() = %q, %v with %s set", got, err, ClaudeAgentBinEnv)
	}
	t.Setenv(ClaudeAgentBinEnv, filepath.Join(dir, "missing"))
	if _, err := FindClaudeAgent(); err == nil {
		t.Error("FindClaudeAgent found a missing override")
	}

	t.Setenv(ClaudeAgentBinEnv, "")
	t.Setenv("XDG_CACHE_HOME", dir)
	if _, err := FindClaudeAgent(); err == nil || !strings.Contains(err.Error(), "make acp") {
		t.Errorf("FindClaudeAgent() with nothing installed: %v", err)
	}
	want := filepath.Join(dir, "betcode", "acp-"+PinnedClaudeAgentVersion, "node_modules", ".bin", "claude-agent-acp")
	must(t, os.MkdirAll(filepath.Dir(want), 0o755))
	must(t, os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755))
	if got, err := FindClaudeAgent(); err != nil || got != want {
		t.Errorf("FindClaudeAgent() = %q, %v; want the install-acp.sh layout %s", got, err, want)
	}
}

// TestInstallScriptReadsThePin: scripts/install-acp.sh reads the pinned
// version from version.go with sed; the line must keep its shape.
func TestInstallScriptReadsThePin(t *testing.T) {
	b, err := os.ReadFile("version.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `const PinnedClaudeAgentVersion = "`+PinnedClaudeAgentVersion+`"`) {
		t.Errorf("version.go no longer has the line scripts/install-acp.sh reads")
	}
	s, err := os.ReadFile("../../scripts/install-acp.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s), "PinnedClaudeAgentVersion") || !strings.Contains(string(s), "acp-${VERSION}") {
		t.Errorf("install-acp.sh does not read PinnedClaudeAgentVersion or install into acp-<version>")
	}
}
