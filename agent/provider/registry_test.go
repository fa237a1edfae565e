package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// stub is a Provider whose Check returns err; it cannot start anything.
type stub struct {
	kind pb.SessionProvider
	err  error
}

func (s stub) Kind() pb.SessionProvider    { return s.kind }
func (s stub) Check(context.Context) error { return s.err }
func (s stub) Start(context.Context, Options) (Conversation, error) {
	return nil, errors.New("stub cannot start")
}

func TestRegistryGet(t *testing.T) {
	codex := pb.SessionProvider_SESSION_PROVIDER_CODEX
	r := NewRegistry(
		stub{kind: pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE},
		stub{kind: codex, err: &NotInstalledError{Kind: codex, Install: "make codex"}},
		stub{kind: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, err: &NotConfiguredError{Kind: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, Configure: "set openai.base_url"}},
	)
	for _, tc := range []struct {
		name    string
		kind    pb.SessionProvider
		want    any // nil or a pointer to the error type
		message string
	}{
		{"unspecified is claude", pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, nil, ""},
		{"claude", pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, nil, ""},
		{"not installed", codex, new(*NotInstalledError), "provider codex is not installed: make codex"},
		{"not configured", pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, new(*NotConfiguredError), "provider openai-api is not configured: set openai.base_url"},
		{"openclaw", pb.SessionProvider_SESSION_PROVIDER_OPENCLAW, new(*UnsupportedError), "provider openclaw is not supported by BetCode; use one of: claude-code, codex, openai-api"},
		{"unknown number", pb.SessionProvider(42), new(*UnsupportedError), "not supported by this agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := r.Get(context.Background(), tc.kind)
			if tc.want == nil {
				if err != nil || p == nil {
					t.Fatalf("Get(%v) = %v, %v", tc.kind, p, err)
				}
				return
			}
			switch w := tc.want.(type) {
			case **NotInstalledError:
				if !errors.As(err, w) {
					t.Fatalf("Get(%v) error %v, want %T", tc.kind, err, *w)
				}
			case **NotConfiguredError:
				if !errors.As(err, w) {
					t.Fatalf("Get(%v) error %v, want %T", tc.kind, err, *w)
				}
			case **UnsupportedError:
				if !errors.As(err, w) {
					t.Fatalf("Get(%v) error %v, want %T", tc.kind, err, *w)
				}
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("Get(%v) error %q lacks %q", tc.kind, err, tc.message)
			}
		})
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want pb.SessionProvider
		err  bool
	}{
		{"", pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, false},
		{"claude", pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, false},
		{"claude-code", pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, false},
		{"Codex", pb.SessionProvider_SESSION_PROVIDER_CODEX, false},
		{"openai_api", pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, false},
		{"SESSION_PROVIDER_OPENCLAW", pb.SessionProvider_SESSION_PROVIDER_OPENCLAW, false},
		{"unspecified", 0, true},
		{"gemini", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
			}
			if err == nil && got != 0 {
				if back, _ := Parse(Name(got)); back != got {
					t.Fatalf("Parse(Name(%v)) = %v", got, back)
				}
			}
		})
	}
}

// FuzzParse: Parse (of a user's --provider) never panics, and what it
// accepts round-trips through Name.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "claude", "codex", "openai-api", "SESSION_PROVIDER_CODEX", "session_provider_unspecified", "-", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil || k == 0 {
			return
		}
		if back, err := Parse(Name(k)); err != nil || back != k {
			t.Fatalf("Parse(%q) = %v but Parse(Name) = %v, %v", s, k, back, err)
		}
	})
}
