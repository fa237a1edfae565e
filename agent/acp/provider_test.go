package acp

import (
	"errors"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/provider"
)

func TestParseAgent(t *testing.T) {
	tests := []struct {
		in   string
		name string
		cmd  []string
		err  bool
	}{
		{"gemini=gemini --acp", "gemini", []string{"gemini", "--acp"}, false},
		{`oc = "/opt/my tools/opencode" acp --x 'a b'`, "oc", []string{"/opt/my tools/opencode", "acp", "--x", "a b"}, false},
		{"noequals", "", nil, true},
		{"=cmd", "", nil, true},
		{"bad name!=cmd", "", nil, true},
		{"x=", "", nil, true},
		{`x="unterminated`, "", nil, true},
	}
	for _, tc := range tests {
		a, err := ParseAgent(tc.in)
		if (err != nil) != tc.err || a.Name != tc.name || strings.Join(a.Command, "|") != strings.Join(tc.cmd, "|") {
			t.Errorf("ParseAgent(%q) = %+v, %v", tc.in, a, err)
		}
	}
}

func TestCheck(t *testing.T) {
	var notConfigured *provider.NotConfiguredError
	var notInstalled *provider.NotInstalledError
	tests := []struct {
		name   string
		agents []Agent
		want   any // nil, or the error type
	}{
		{"none", nil, &notConfigured},
		{"found", []Agent{{Name: "sh", Command: []string{"sh", "-c", "x"}}}, nil},
		{"missing", []Agent{{Name: "gone", Command: []string{"/nonexistent/agent"}}}, &notInstalled},
		{"one of two missing", []Agent{{Name: "gone", Command: []string{"no-such-acp-agent"}}, {Name: "sh", Command: []string{"/bin/sh"}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Provider{Agents: tc.agents}).Check(t.Context())
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("Check() = %v", err)
			case tc.want != nil && !errors.As(err, tc.want):
				t.Errorf("Check() = %v, want a %T", err, tc.want)
			}
		})
	}
}
