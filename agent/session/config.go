package session

import (
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/permission"
	"github.com/betcode-dev/betcode/agent/provider"
)

const defaultPermissionTimeout = 5 * time.Minute

// Config configures a Manager. Zero values take the defaults in brackets.
type Config struct {
	ClaudeBin string   // path of the claude binary (required)
	ClaudeEnv []string // extra environment for every CLI (KEY=VALUE)
	// ClaudeEnvDefaults are set for every CLI unless the agent's own
	// environment sets them.
	ClaudeEnvDefaults []string
	DefaultModel      string        // --model when the client names none
	DefaultDir        string        // working directory when the client names none [process cwd]
	ClaudeHome        string        // home whose ~/.claude holds Claude Code transcripts [$HOME]
	SubscriberBuffer  int           // events buffered per client before it is cut off [8192]
	WatchBuffer       int           // session updates buffered per WatchSessions stream before it is cut off [1024]
	StopGrace         time.Duration // per stop step: end_session, SIGTERM, SIGKILL [3s]
	MaxMessageBytes   int           // largest user message accepted [1 MiB]
	// Permissions decides can_use_tool requests before anyone is asked
	// [no rules: always ask].
	Permissions *permission.Engine
	// PermissionTimeout denies a request nobody answered [5m]; negative
	// disables the timeout.
	PermissionTimeout time.Duration
	MaxProcesses      int           // concurrent Claude processes [8]
	HangTimeout       time.Duration // kill a CLI silent this long mid-turn [10m]; negative disables
	MaxRestarts       int           // consecutive crash restarts before a cooldown [5]
	CrashCooldown     time.Duration // refusal period after MaxRestarts crashes [5m]
	CancelGrace       time.Duration // wait for an interrupted turn before SIGINT [3s]
	AutoCompactTokens uint64        // compact after a turn whose context exceeds this; 0 = off
	Logger            *slog.Logger
	Now               func() time.Time
	// Metrics, if set, counts CLI starts, crashes, slow consumers and
	// permission decisions.
	Metrics *Metrics
	// LogMetrics, if set, instruments the event log's commits.
	LogMetrics *eventlog.Metrics
	// Tracer, if set, gives every CLI turn a span (trace.go), a child of
	// the call that sent its message.
	Tracer trace.Tracer
	// Providers are the providers sessions can run [Claude Code from
	// ClaudeBin only].
	Providers *provider.Registry
}

func (c *Config) setDefaults() {
	if c.SubscriberBuffer <= 0 {
		c.SubscriberBuffer = 8192
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = 1024
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 3 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.Permissions == nil {
		c.Permissions, _ = permission.New(nil, permission.Options{})
	}
	if c.PermissionTimeout == 0 {
		c.PermissionTimeout = defaultPermissionTimeout
	}
	if c.MaxProcesses <= 0 {
		c.MaxProcesses = 8
	}
	if c.HangTimeout == 0 {
		c.HangTimeout = 10 * time.Minute
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 5
	}
	if c.CrashCooldown <= 0 {
		c.CrashCooldown = 5 * time.Minute
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Providers == nil {
		c.Providers = provider.NewRegistry(&claude.Provider{Bin: c.ClaudeBin})
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.ClaudeBin == "" {
		return errors.New("session: no claude binary configured (set --claude-bin or BETCODE_CLAUDE_BIN)")
	}
	return nil
}
