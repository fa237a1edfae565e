package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Approval policies and sandbox modes Codex accepts for a thread.
const (
	PolicyUntrusted = "untrusted"
	PolicyOnRequest = "on-request"
	PolicyNever     = "never"

	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
	SandboxFullAccess     = "danger-full-access"
)

// Defaults of Config.
const (
	DefaultModel             = "gpt-5.5"
	DefaultApprovalPolicy    = PolicyUntrusted
	DefaultSandbox           = SandboxWorkspaceWrite
	DefaultRequestMaxRetries = 4
	DefaultStreamMaxRetries  = 5
	// APIKeyEnv is the environment variable the app-server reads the model
	// API key from (the provider's env_key).
	APIKeyEnv = "BETCODE_CODEX_API_KEY"
	// providerID names the model provider in config.toml.
	providerID = "betcode"
)

// Config says how to run the app-server. Binary, Home and BaseURL are
// required; DefaultConfig fills the rest.
type Config struct {
	// Binary is the native codex executable (FindBinary finds the pinned
	// one installed by scripts/install-codex.sh).
	Binary string
	// Home is the daemon-private CODEX_HOME: config.toml (written by Start),
	// sessions, SQLite state. Created 0700 if missing. Never the user's
	// ~/.codex: the app-server writes trust settings into its config.toml.
	Home string
	// BaseURL is the model endpoint, an OpenAI Responses API base such as
	// "https://api.openai.com/v1"; Codex appends /responses. It is the only
	// network endpoint configured.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends none.
	APIKey string
	// Model is the model slug; default DefaultModel. An unknown slug works
	// but loses the apply_patch tool.
	Model string
	// ApprovalPolicy is passed with every thread/start and thread/resume:
	// untrusted (ask for every command and patch), on-request (ask when the
	// model wants to leave the sandbox) or never. Default untrusted.
	ApprovalPolicy string
	// Sandbox is passed with every thread/start and thread/resume:
	// read-only, workspace-write or danger-full-access. Default
	// workspace-write. Use danger-full-access where bubblewrap cannot create
	// namespaces (containers): approvals still work.
	Sandbox string
	// RequestMaxRetries and StreamMaxRetries are Codex's retry counts for a
	// failed model request and a broken stream; 0 fails at once.
	RequestMaxRetries, StreamMaxRetries int
	// ClientName and ClientVersion are sent in initialize; the name becomes
	// the originator header. Default "betcode" and "dev".
	ClientName, ClientVersion string
	// Env is added to the app-server's environment (KEY=value).
	Env []string
	// Logger receives the app-server's stderr and protocol problems;
	// default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every optional field set.
func DefaultConfig() Config {
	return Config{
		Model:             DefaultModel,
		ApprovalPolicy:    DefaultApprovalPolicy,
		Sandbox:           DefaultSandbox,
		RequestMaxRetries: DefaultRequestMaxRetries,
		StreamMaxRetries:  DefaultStreamMaxRetries,
		ClientName:        "betcode",
		ClientVersion:     "dev",
	}
}

func (c *Config) setDefaults() {
	d := DefaultConfig()
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.ApprovalPolicy == "" {
		c.ApprovalPolicy = d.ApprovalPolicy
	}
	if c.Sandbox == "" {
		c.Sandbox = d.Sandbox
	}
	if c.ClientName == "" {
		c.ClientName = d.ClientName
	}
	if c.ClientVersion == "" {
		c.ClientVersion = d.ClientVersion
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports the first problem of c.
func (c *Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("codex config: no binary (run make codex)")
	case c.Home == "":
		return errors.New("codex config: no CODEX_HOME directory")
	case c.BaseURL == "":
		return errors.New("codex config: no model base URL")
	case !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://"):
		return fmt.Errorf("codex config: base URL %q is not http(s)", c.BaseURL)
	case c.RequestMaxRetries < 0 || c.StreamMaxRetries < 0:
		return errors.New("codex config: negative retry count")
	}
	switch c.ApprovalPolicy {
	case "", PolicyUntrusted, PolicyOnRequest, PolicyNever:
	default:
		return fmt.Errorf("codex config: unknown approval policy %q", c.ApprovalPolicy)
	}
	switch c.Sandbox {
	case "", SandboxReadOnly, SandboxWorkspaceWrite, SandboxFullAccess:
	default:
		return fmt.Errorf("codex config: unknown sandbox %q", c.Sandbox)
	}
	return nil
}

// ConfigTOML returns the config.toml Start writes into CODEX_HOME: one
// custom model provider at BaseURL (Responses API, no websockets) and the
// plugins feature off, which removes Codex's only other network access.
func (c *Config) ConfigTOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by BetCode (agent/codex); rewritten at every start.\n")
	fmt.Fprintf(&b, "model = %s\n", tomlString(c.Model))
	fmt.Fprintf(&b, "model_provider = %s\n\n", tomlString(providerID))
	fmt.Fprintf(&b, "[model_providers.%s]\n", providerID)
	fmt.Fprintf(&b, "name = %s\n", tomlString("BetCode model endpoint"))
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(strings.TrimRight(c.BaseURL, "/")))
	if c.APIKey != "" {
		fmt.Fprintf(&b, "env_key = %s\n", tomlString(APIKeyEnv))
	}
	fmt.Fprintf(&b, "wire_api = \"responses\"\n")
	fmt.Fprintf(&b, "request_max_retries = %d\n", c.RequestMaxRetries)
	fmt.Fprintf(&b, "stream_max_retries = %d\n", c.StreamMaxRetries)
	fmt.Fprintf(&b, "supports_websockets = false\n\n")
	fmt.Fprintf(&b, "[features]\nplugins = false\n")
	return b.String()
}

// tomlString quotes s as a TOML basic string. JSON's string escapes are
// all valid TOML escapes.
func tomlString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		return `""` // a Go string always marshals
	}
	return string(b)
}

// writeHome creates CODEX_HOME and writes its config.toml.
func (c *Config) writeHome() error {
	if err := os.MkdirAll(c.Home, 0o700); err != nil {
		return fmt.Errorf("create CODEX_HOME %s: %w", c.Home, err)
	}
	path := filepath.Join(c.Home, "config.toml")
	if err := os.WriteFile(path, []byte(c.ConfigTOML()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// environ returns the app-server's environment: the daemon's, without
// variables that would point Codex elsewhere, plus CODEX_HOME, the API key
// and c.Env.
func (c *Config) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CODEX_") || strings.HasPrefix(k, "OPENAI_") || k == APIKeyEnv {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "CODEX_HOME="+c.Home)
	if c.APIKey != "" {
		env = append(env, APIKeyEnv+"="+c.APIKey)
	}
	return append(env, c.Env...)
}
