package claude

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Provider is the Claude Code CLI as a provider.Provider.
type Provider struct {
	// Bin is the claude binary (path or name on PATH).
	Bin string
}

var _ provider.Provider = (*Provider)(nil)

// Kind is SESSION_PROVIDER_CLAUDE_CODE.
func (p *Provider) Kind() pb.SessionProvider { return pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE }

// Check reports a binary that cannot be found as a *provider.NotInstalledError.
func (p *Provider) Check(context.Context) error {
	if _, err := Resolve(p.Bin); err != nil {
		var be *BinaryError
		if errors.As(err, &be) {
			err = be.Err
		}
		return &provider.NotInstalledError{Kind: p.Kind(), Err: err,
			Install: "install Claude Code (npm install -g @anthropic-ai/claude-code) or point --claude-bin (BETCODE_CLAUDE_BIN) at a working binary"}
	}
	return nil
}

// Start spawns the CLI for the conversation and initializes it. Options.
// Config accepts no keys: Claude's settings come from the session (model,
// allowed tools, permission mode).
func (p *Provider) Start(ctx context.Context, o provider.Options) (provider.Conversation, error) {
	for k := range o.Config {
		return nil, fmt.Errorf("claude: unknown provider_config key %q (Claude Code takes none)", k)
	}
	opts := Options{
		Bin: p.Bin, Dir: o.Dir, Model: o.Model, SessionID: o.SessionID,
		AllowedTools: o.AllowedTools, PermissionMode: o.PermissionMode, MaxTurns: o.MaxTurns, Env: o.Env, Logger: o.Logger,
	}
	if o.ResumeID != "" {
		opts.SessionID, opts.Resume = o.ResumeID, true
	}
	proc, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := proc.Initialize(); err != nil {
		_ = proc.Kill()
		go func() { _ = proc.Drain(context.Background()); _ = proc.Wait() }()
		return nil, fmt.Errorf("initialize claude: %w", err)
	}
	return proc, nil
}

var _ provider.Conversation = (*Process)(nil)

// SendTurn writes a user line.
func (p *Process) SendTurn(t provider.Turn) error {
	return p.SendUser(UserContent{Text: t.Text, Blocks: t.Blocks}, t.ID)
}

// InterruptTurn sends an interrupt control request.
func (p *Process) InterruptTurn() error {
	_, err := p.Interrupt()
	return err
}

// ForceInterrupt sends SIGINT: the CLI ends the turn and exits.
func (p *Process) ForceInterrupt() error { return p.Signal(os.Interrupt) }

// Answer answers a can_use_tool request: allow with updatedInput, or deny
// with a message (Cancel denies; the caller interrupts the turn).
func (p *Process) Answer(requestID string, a provider.Answer) error {
	switch a.Decision {
	case provider.Allow, provider.AllowForSession:
		resp := map[string]any{"behavior": "allow"}
		if len(a.Input) > 0 {
			resp["updatedInput"] = a.Input
		}
		return p.SendControlSuccess(requestID, resp)
	case provider.Deny, provider.Cancel:
		return p.SendControlSuccess(requestID, map[string]any{"behavior": "deny", "message": a.Message})
	}
	return fmt.Errorf("claude: unknown decision %d", a.Decision)
}
