package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ConfigAgent is the provider_config key naming the ACP agent of a session
// (one of the --acp-agent names).
const ConfigAgent = "agent"

// Agent is one ACP agent the daemon can run.
type Agent struct {
	// Name is how sessions and users name it ("gemini").
	Name string
	// Command is the program and its arguments ("gemini", "--acp").
	Command []string
}

// ParseAgent parses an --acp-agent value: NAME=COMMAND [ARGS...], the
// command split on white space (single or double quotes group words).
func ParseAgent(s string) (Agent, error) {
	name, cmd, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return Agent{}, fmt.Errorf("acp agent %q: want NAME=COMMAND [ARGS...]", s)
	}
	if strings.ContainsFunc(name, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return Agent{}, fmt.Errorf("acp agent name %q: use letters, digits, '-', '_' and '.'", name)
	}
	args, err := splitCommand(cmd)
	if err != nil {
		return Agent{}, fmt.Errorf("acp agent %s: %w", name, err)
	}
	if len(args) == 0 {
		return Agent{}, fmt.Errorf("acp agent %s: empty command", name)
	}
	return Agent{Name: name, Command: args}, nil
}

// splitCommand splits s into words on white space; quotes group words.
func splitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// DefaultStartTimeout bounds an agent's start (initialize and
// session/new or session/load) when Provider.StartTimeout is 0.
const DefaultStartTimeout = 2 * time.Minute

// Provider runs sessions with provider acp.
type Provider struct {
	// Agents are the configured agents.
	Agents []Agent
	// StartTimeout bounds an agent's start, so that a command that does
	// not speak ACP cannot hold a session; 0 is DefaultStartTimeout.
	StartTimeout time.Duration
}

var _ provider.Provider = (*Provider)(nil)

// Kind is SESSION_PROVIDER_ACP.
func (p *Provider) Kind() pb.SessionProvider { return pb.SessionProvider_SESSION_PROVIDER_ACP }

// Check reports a provider without agents as a *provider.NotConfiguredError,
// and one none of whose agents' programs can be found as a
// *provider.NotInstalledError (a missing one among others fails when a
// session starts it).
func (p *Provider) Check(context.Context) error {
	if len(p.Agents) == 0 {
		return &provider.NotConfiguredError{Kind: p.Kind(), Configure: "name an ACP agent with --acp-agent NAME='COMMAND ARGS' (e.g. --acp-agent gemini='gemini --experimental-acp'), or acp-agent in the config file"}
	}
	var errs []error
	for _, a := range p.Agents {
		if _, err := exec.LookPath(a.Command[0]); err != nil {
			errs = append(errs, fmt.Errorf("acp agent %s: %w", a.Name, err))
		}
	}
	if len(errs) == len(p.Agents) {
		return &provider.NotInstalledError{Kind: p.Kind(), Err: errors.Join(errs...),
			Install: "install the agent's program, or fix its command in --acp-agent NAME='COMMAND ARGS'"}
	}
	return nil
}

// agent returns the agent a session names in its provider_config (the
// only one when it names none).
func (p *Provider) agent(config map[string]string) (Agent, error) {
	name := config[ConfigAgent]
	if name == "" && len(p.Agents) == 1 {
		return p.Agents[0], nil
	}
	names := make([]string, 0, len(p.Agents))
	for _, a := range p.Agents {
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	slices.Sort(names)
	if name == "" {
		return Agent{}, fmt.Errorf("several ACP agents are configured: name one with provider_config %s (one of %s)", ConfigAgent, strings.Join(names, ", "))
	}
	return Agent{}, fmt.Errorf("no ACP agent %q is configured (one of %s)", name, strings.Join(names, ", "))
}

// Start spawns the session's agent in opts.Dir (its own process group),
// initializes it and creates its ACP session, or loads opts.ResumeID when
// the agent can load sessions. The conversation is a provider.Stream.
func (p *Provider) Start(ctx context.Context, opts provider.Options) (provider.Conversation, error) {
	ag, err := p.agent(opts.Config)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("acp: no working directory")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("acp: working directory %q: %w", opts.Dir, err)
	}
	opts.Dir = dir
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	timeout := p.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return start(ctx, ag, opts, log)
}
