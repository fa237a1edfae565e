package provider

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Provider starts conversations with one kind of coding agent.
type Provider interface {
	// Kind is the SessionProvider this provider implements.
	Kind() pb.SessionProvider
	// Check reports whether the provider can run on this machine: nil, or
	// a *NotInstalledError or *NotConfiguredError saying what is missing.
	Check(ctx context.Context) error
	// Start spawns (or connects to) the agent for one conversation; ctx
	// bounds the start only, not the conversation.
	Start(ctx context.Context, opts Options) (Conversation, error)
}

// Options describe one conversation to start or resume.
type Options struct {
	// SessionID is the BetCode session the conversation belongs to.
	SessionID string
	// ResumeID names the provider's conversation to continue (Claude: the
	// session id; Codex: the thread id); "" starts a new one.
	ResumeID string
	// Dir is the working directory (the project).
	Dir string
	// Model is the provider-specific model ("" = the provider's default).
	Model string
	// AllowedTools are tools the agent may use without asking, in the
	// provider's rule syntax (providers without such a notion ignore them).
	AllowedTools []string
	// PermissionMode is a provider-specific mode ("" = default).
	PermissionMode string
	// MaxTurns bounds the model round trips of one user message (0 = the
	// provider's default). Claude Code and openai-api honour it; a turn
	// stopped by it ends with stop reason "max_turns" or
	// "error_max_turns".
	MaxTurns int
	// Env is extra environment (KEY=VALUE) for a process-based provider.
	Env []string
	// Config is the session's provider_config (provider-specific keys).
	Config map[string]string
	// Logger receives the provider's logs.
	Logger *slog.Logger
}

// Turn is one user message.
type Turn struct {
	// ID uniquely identifies the message.
	ID string
	// Text is the message text.
	Text string
	// Blocks, when set, replace Text with content blocks (text, images) in
	// the Anthropic Messages shape; providers convert them as they can.
	Blocks []map[string]any
}

// Decision is how a permission request or question is answered.
type Decision int

// Decisions. Codex maps them to accept, acceptForSession, decline and
// cancel; Claude Code to allow, allow (the agent records the grant) and deny.
const (
	Allow Decision = iota + 1
	AllowForSession
	Deny
	// Cancel denies and ends the turn.
	Cancel
)

// Answer answers a permission request or question.
type Answer struct {
	Decision Decision
	// Input, with Allow or AllowForSession, is what the tool runs with:
	// the request's own input, the input the user edited, or (for a
	// question) the input with the answers filled in.
	Input json.RawMessage
	// Message, with Deny or Cancel, tells the model why.
	Message string
}

// Conversation is one running conversation with a provider. Its output is
// read by the session manager; the methods here drive it. They are safe to
// call from any goroutine.
type Conversation interface {
	// SendTurn sends a user message; it starts a turn, or joins the
	// running one when the provider queues messages.
	SendTurn(t Turn) error
	// InterruptTurn asks the provider to end the running turn; the turn
	// still ends with the provider's own "turn finished" output.
	InterruptTurn() error
	// ForceInterrupt ends a turn that InterruptTurn did not end (Claude:
	// SIGINT), possibly ending the process.
	ForceInterrupt() error
	// Answer answers the open request requestID.
	Answer(requestID string, a Answer) error
	// Stop ends the conversation gracefully, escalating after grace per
	// step; it returns once the process has exited.
	Stop(grace time.Duration)
	// Kill ends the process at once.
	Kill() error
	// Wait waits for the process to exit and returns its exit error.
	Wait() error
	// Done is closed when the process has exited (after Wait).
	Done() <-chan struct{}
	// Pid is the process id (0 when not process-based).
	Pid() int
	// Stderr is the tail of the process's diagnostics, for crash reports.
	Stderr() string
}

// ConfigChecker is implemented by providers that can tell at once whether
// a session's provider_config is usable (e.g. that it names a configured
// ACP agent), so that creating the session fails rather than its first
// turn.
type ConfigChecker interface {
	CheckConfig(config map[string]string) error
}
