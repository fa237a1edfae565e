package codex

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/provider"
)

// TestProviderCheck: a missing binary is "not installed" with how to
// install the pinned Codex; a missing endpoint is "not configured".
func TestProviderCheck(t *testing.T) {
	bin := requireCodex(t)
	missing := filepath.Join(t.TempDir(), "codex")
	for _, tc := range []struct {
		name string
		p    Provider
		want any
		msg  string
	}{
		{"binary missing", Provider{Binary: missing, BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, new(*provider.NotInstalledError), "npm i -g @openai/codex@" + PinnedVersion},
		{"name not on PATH", Provider{Binary: "codex-not-on-path-xyz", BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, new(*provider.NotInstalledError), "make codex"},
		{"no base URL", Provider{Binary: bin, Home: t.TempDir()}, new(*provider.NotConfiguredError), "--codex-base-url"},
		{"ready", Provider{Binary: bin, BaseURL: "http://127.0.0.1:1/v1", Home: t.TempDir()}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(context.Background())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.As(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Check = %v, want %T mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}
