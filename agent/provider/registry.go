package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Registry maps SessionProviders to their implementations.
type Registry struct {
	mu sync.RWMutex
	m  map[pb.SessionProvider]Provider
}

// NewRegistry returns a registry holding ps.
func NewRegistry(ps ...Provider) *Registry {
	r := &Registry{m: map[pb.SessionProvider]Provider{}}
	for _, p := range ps {
		r.Register(p)
	}
	return r
}

// Register adds p, replacing any provider of the same kind.
func (r *Registry) Register(p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[pb.SessionProvider]Provider{}
	}
	r.m[p.Kind()] = p
}

// Kinds returns the registered kinds, in enum order.
func (r *Registry) Kinds() []pb.SessionProvider {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]pb.SessionProvider, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Lookup returns the provider of kind without checking that it can run;
// UNSPECIFIED means Claude Code. It fails with *UnsupportedError.
func (r *Registry) Lookup(kind pb.SessionProvider) (Provider, error) {
	kind = Default(kind)
	r.mu.RLock()
	p := r.m[kind]
	r.mu.RUnlock()
	if p == nil {
		return nil, &UnsupportedError{Kind: kind, Supported: r.Kinds()}
	}
	return p, nil
}

// Get is Lookup followed by the provider's Check.
func (r *Registry) Get(ctx context.Context, kind pb.SessionProvider) (Provider, error) {
	p, err := r.Lookup(kind)
	if err != nil {
		return nil, err
	}
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Default maps UNSPECIFIED to Claude Code, the provider BetCode always
// has.
func Default(kind pb.SessionProvider) pb.SessionProvider {
	if kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		return pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE
	}
	return kind
}

// Name is the short name of a kind as users type it ("claude-code",
// "codex", "openai-api", "openclaw").
func Name(kind pb.SessionProvider) string {
	s := strings.TrimPrefix(kind.String(), "SESSION_PROVIDER_")
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// Parse is the inverse of Name; it also accepts the enum names and
// "claude". "" is UNSPECIFIED.
func Parse(s string) (pb.SessionProvider, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, nil
	case "claude":
		return pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, nil
	}
	t = strings.TrimPrefix(strings.ReplaceAll(t, "-", "_"), "session_provider_")
	if v, ok := pb.SessionProvider_value["SESSION_PROVIDER_"+strings.ToUpper(t)]; ok && v != 0 {
		return pb.SessionProvider(v), nil
	}
	names := make([]string, 0, 4)
	for v := range pb.SessionProvider_name {
		if v != 0 {
			names = append(names, Name(pb.SessionProvider(v)))
		}
	}
	slices.Sort(names)
	return 0, fmt.Errorf("unknown provider %q (one of %s)", s, strings.Join(names, ", "))
}
