package session

import (
	"errors"
	"log/slog"
	"time"
)

// Config configures a Manager. Zero values take the defaults in brackets.
type Config struct {
	ClaudeBin        string        // path of the claude binary (required)
	ClaudeEnv        []string      // extra environment for every CLI (KEY=VALUE)
	DefaultModel     string        // --model when the client names none
	DefaultDir       string        // working directory when the client names none [process cwd]
	SubscriberBuffer int           // events buffered per client before it is cut off [8192]
	StopGrace        time.Duration // per stop step: end_session, SIGTERM, SIGKILL [3s]
	MaxMessageBytes  int           // largest user message accepted [1 MiB]
	Logger           *slog.Logger
	Now              func() time.Time
}

func (c *Config) setDefaults() {
	if c.SubscriberBuffer <= 0 {
		c.SubscriberBuffer = 8192
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 3 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.ClaudeBin == "" {
		return errors.New("session: no claude binary configured (set --claude-bin or BETCODE_CLAUDE_BIN)")
	}
	return nil
}
