package session

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// kindProvider is a provider of any kind that can run nothing; it lets
// Create accept sessions of that kind.
type kindProvider struct{ kind pb.SessionProvider }

func (p kindProvider) Kind() pb.SessionProvider    { return p.kind }
func (p kindProvider) Check(context.Context) error { return nil }
func (p kindProvider) Start(context.Context, provider.Options) (provider.Conversation, error) {
	return nil, errors.New("kindProvider runs nothing")
}

// MaxTurns reaches the provider of the providers that can honour it and
// is refused, naming the provider, for the others.
func TestCreateMaxTurns(t *testing.T) {
	script := &scriptProvider{convs: make(chan *scriptStream, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No CLI is needed: the manager is opened without newManager, which
	// builds the agent's binaries.
	m, err := Open(ctx, Config{ClaudeBin: "claude-is-not-run", DefaultDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Providers: provider.NewRegistry(script, kindProvider{pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE}, kindProvider{pb.SessionProvider_SESSION_PROVIDER_CODEX})},
		filepath.Join(t.TempDir(), "agent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	tests := []struct {
		name     string
		provider pb.SessionProvider
		turns    int
		wantMeta string // "" : not recorded
		wantErr  string
	}{
		{"claude", pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, 3, "3", ""},
		{"no limit", pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, 0, "", ""},
		{"openai-api", pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, 2, "2", ""},
		{"codex refused", pb.SessionProvider_SESSION_PROVIDER_CODEX, 2, "", "max_turns is not supported by provider codex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := m.Create(ctx, CreateRequest{Provider: tt.provider, MaxTurns: tt.turns})
			var inv *InvalidError
			switch {
			case tt.wantErr != "":
				if !errors.As(err, &inv) || inv.Msg[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("Create: %v, want an InvalidError starting %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := s.Metadata()[metaMaxTurns]; got != tt.wantMeta {
				t.Fatalf("metadata %s = %q, want %q", metaMaxTurns, got, tt.wantMeta)
			}
		})
	}

	// The provider is started with the limit.
	s, err := m.Create(ctx, CreateRequest{Provider: pb.SessionProvider_SESSION_PROVIDER_OPENAI_API, MaxTurns: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendUser(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}
	c := <-script.convs
	<-c.turns
	script.mu.Lock()
	got := script.started[len(script.started)-1].MaxTurns
	script.mu.Unlock()
	if got != 4 {
		t.Fatalf("provider started with MaxTurns %d, want 4", got)
	}
	c.out <- endTurn()
}
