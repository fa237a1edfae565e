package config

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/betcode-dev/betcode/agent/acp"
)

// Kind is the type of a setting's value.
type Kind int

// The kinds of settings; Go types of their values in brackets.
const (
	String     Kind = iota // [string]
	StringList             // [[]string]
	Duration               // [time.Duration]; JSON: a Go duration string, "5m"
	Int                    // [int]
	Uint                   // [uint64]
	RuleList               // [[]any]: ccgrid permission rules, as the config file has them
	Bool                   // [bool]
)

func (k Kind) String() string {
	switch k {
	case String:
		return "string"
	case StringList:
		return "list of strings"
	case Duration:
		return "duration"
	case Int:
		return "integer"
	case Uint:
		return "unsigned integer"
	case RuleList:
		return "list of rules"
	case Bool:
		return "boolean"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Key is one setting.
type Key struct {
	Name string // config-file key and flag name, e.g. "permission-timeout"
	Kind Kind
	// Default is the value when no layer sets one, of the Kind's Go type.
	Default any
	// DefaultDoc, when set, is how the docs show a default that depends on
	// the machine (Default is then its zero value and the daemon fills it).
	DefaultDoc string
	Usage      string // one line, for --help and the docs
	// NoFlag: only the config file sets it (no flag, no environment).
	NoFlag bool
	// Hot: a change through ConfigService applies without a restart.
	Hot bool
	// ReadOnly: ConfigService cannot change it; the reason says why.
	ReadOnly string
	// Check validates a value of the Kind's Go type beyond its type.
	Check func(v any) error
	// Secret: never logged, and ConfigService shows it masked.
	Secret bool
}

// Env is the environment variable that sets k, e.g. BETCODE_DATA_DIR.
func (k Key) Env() string {
	if k.NoFlag {
		return ""
	}
	return "BETCODE_" + strings.ToUpper(strings.ReplaceAll(k.Name, "-", "_"))
}

// Flag is the command-line flag that sets k, e.g. --data-dir.
func (k Key) Flag() string {
	if k.NoFlag {
		return ""
	}
	return "--" + k.Name
}

// Keys are the daemon's settings, in the order of the docs.
var Keys = []Key{
	{Name: "listen", Kind: StringList, DefaultDoc: "`unix://$XDG_RUNTIME_DIR/betcode/agent.sock` (else `/tmp/betcode-$UID/agent.sock`)",
		Usage: "address to serve: unix:///path or host:port (repeatable); TCP off loopback needs --tls-cert and --tls-key", Check: checkListen},
	{Name: "data-dir", Kind: String, DefaultDoc: "`$XDG_DATA_HOME/betcode` (else `~/.local/share/betcode`)",
		Usage:    "directory for the event log, the local token and settings.json",
		ReadOnly: "the settings file lives in the data directory; set --data-dir or BETCODE_DATA_DIR"},
	{Name: "claude-bin", Kind: String, Default: "claude", Usage: "the Claude Code CLI binary (name on PATH or path)", Check: nonEmpty},
	{Name: "codex-bin", Kind: String, DefaultDoc: "the pinned Codex `make codex` installs (`$BETCODE_CODEX_BIN` if set)", Usage: "the Codex CLI binary (name on PATH or path) of sessions with provider codex (docs/codex.md)"},
	{Name: "codex-base-url", Kind: String, Usage: "OpenAI Responses API base of Codex sessions, e.g. https://api.openai.com/v1 (key from OPENAI_API_KEY); empty: Codex is not configured"},
	{Name: "codex-model", Kind: String, DefaultDoc: "`gpt-5.5`", Usage: "default model of Codex sessions", Check: noSpace},
	{Name: "codex-sandbox", Kind: String, Default: "workspace-write", Usage: "sandbox of Codex's commands: read-only, workspace-write or danger-full-access (where bubblewrap cannot run, e.g. containers)", Check: checkCodexSandbox},
	{Name: "openai-base-url", Kind: String, Usage: "OpenAI-compatible Responses API base of sessions with provider openai-api, e.g. https://api.openai.com/v1 or a local server (key from OPENAI_API_KEY); empty: the provider is not configured (docs/providers.md)"},
	{Name: "openai-model", Kind: String, DefaultDoc: "`gpt-5.5`", Usage: "default model of openai-api sessions", Check: noSpace},
	{Name: "acp-agent", Kind: StringList, Usage: "an Agent Client Protocol agent sessions with provider acp can run, as NAME='COMMAND ARGS', e.g. gemini='gemini --experimental-acp' (repeatable; docs/providers.md)", Check: checkACPAgents},
	{Name: "model", Kind: String, Hot: true, DefaultDoc: "Claude Code's default", Usage: "default model of new sessions (Claude Code's default when empty)", Check: noSpace},
	{Name: "allow", Kind: StringList, Hot: true, Usage: "permission rule to allow without asking, Claude Code syntax, e.g. 'Bash(go test *)' (repeatable)", Check: checkRules},
	{Name: "deny", Kind: StringList, Hot: true, Usage: "permission rule to deny without asking, e.g. 'Bash(rm *)' (repeatable; deny wins)", Check: checkRules},
	{Name: "ask", Kind: StringList, Hot: true, Usage: "permission rule that always asks (repeatable)", Check: checkRules},
	{Name: "permission_rules", Kind: RuleList, NoFlag: true, Usage: "ccgrid-style permission rules: a list of {id, toolName, pathPattern, behavior} (docs/permissions.md)",
		ReadOnly: "edit the --config file"},
	{Name: "permission-timeout", Kind: Duration, Default: 5 * time.Minute, Hot: true, Usage: "deny a permission request nobody answered within this time (negative: never)"},
	{Name: "max-processes", Kind: Int, Default: 8, Usage: "Claude processes running at once; idle ones are stopped to make room", Check: positive},
	{Name: "hang-timeout", Kind: Duration, Default: 10 * time.Minute, Usage: "stop a Claude process that prints nothing this long mid-turn (negative: never)"},
	{Name: "auto-compact-tokens", Kind: Uint, Default: uint64(0), Hot: true, Usage: "compact a session after a turn whose context exceeds this many tokens (0: never)"},
	{Name: "feature-flag", Kind: StringList, Usage: "turn on a feature flag that is off by default, e.g. subagent_orchestration (ALPHA: SubagentService, docs/subagents.md; repeatable)", Check: checkFeatureFlags},
	{Name: "subagent-max-cost-usd", Kind: String, DefaultDoc: "none",
		Usage: "stop an orchestration (SubagentService) once its steps cost more than this many US dollars, e.g. 5 or 0.50: no further step starts, the running ones are cancelled (docs/subagents.md)", Check: checkCost},
	{Name: "subagent-max-parallel", Kind: Int, Default: 4,
		Usage: "most steps of one orchestration (SubagentService) running at once, 1 to 16; a request's max_parallel may only lower it. Each runs a CLI: raise max-processes with it (docs/subagents.md)", Check: checkSubagentParallel},
	{Name: "tls-cert", Kind: String, Usage: "TLS certificate for TCP listeners (required off loopback)"},
	{Name: "tls-key", Kind: String, Usage: "TLS key for --tls-cert"},
	{Name: "tls-client-ca", Kind: String, Usage: "with --tls-cert: accept client certificates of this CA instead of the local token"},
	{Name: "relay", Kind: String, DefaultDoc: "the relay `betcode-agent enroll` stored", Usage: "relay to dial out to (host:port); clients then reach this machine through it", Check: checkHostPort},
	{Name: "relay-ca", Kind: String, Usage: "CA certificate of the relay"},
	{Name: "machine-cert", Kind: String, Usage: "this machine's client certificate (from `betcode-relay certs machine`; enrolled machines need none)"},
	{Name: "machine-key", Kind: String, Usage: "the key of --machine-cert"},
	{Name: "relay-e2e", Kind: String, Default: "required",
		Usage: "calls through the relay: required serves them only inside an end-to-end channel from a paired device (docs/security.md); optional also serves them in clear, to a relay login that has not paired (the relay can then read and act)",
		Check: checkRelayE2E, ReadOnly: "it decides what the relay may do: set it on the machine (--relay-e2e or the --config file)"},
	{Name: "machine-name", Kind: String, DefaultDoc: "the hostname", Usage: "name shown in `betcode machines`"},
	{Name: "cert-renew-check", Kind: Duration, Default: time.Duration(0), DefaultDoc: "`1h`",
		Usage: "how often to check whether the machine certificate needs renewing (renewed with a third of its lifetime left)", Check: nonNegative},
	{Name: "drain-timeout", Kind: Duration, Default: 30 * time.Second,
		Usage: "on SIGTERM, let running turns finish for up to this long while refusing new ones (0: don't wait; a second SIGTERM stops waiting)", Check: nonNegative},
	{Name: "http-listen", Kind: String, Default: "127.0.0.1:7819",
		Usage: "host:port serving the web app and its API (docs/web-api.md); empty disables; off loopback it needs --http-tls-cert or --http-insecure", Check: checkHostPort},
	{Name: "http-tls-cert", Kind: String, Usage: "TLS certificate of --http-listen (required off loopback unless --http-insecure)"},
	{Name: "http-tls-key", Kind: String, Usage: "the key of --http-tls-cert"},
	{Name: "http-insecure", Kind: Bool, Usage: "serve --http-listen off loopback without TLS (tokens then cross the network in clear)"},
	{Name: "web-origin", Kind: StringList, Usage: "origin (scheme://host[:port]) besides the web server's own whose pages may open its WebSocket (repeatable)", Check: checkOrigins},
	{Name: "metrics-listen", Kind: String, Usage: "host:port serving Prometheus /metrics (e.g. 127.0.0.1:9464); empty disables", Check: checkHostPort},
	{Name: "log-level", Kind: String, Default: "info", Usage: "log level: debug, info, warn, error", Check: checkLogLevel},
	{Name: "log-format", Kind: String, Default: "text", Usage: "log lines as text (logfmt) or json; lines of a traced call carry its trace_id", Check: checkLogFormat},
	{Name: "otlp-endpoint", Kind: String, Usage: "host:port of an OTLP/gRPC collector to export traces to (TLS unless loopback or --otlp-insecure); empty: no tracing (docs/observability.md)", Check: checkHostPort},
	{Name: "otlp-insecure", Kind: Bool, Usage: "send traces to --otlp-endpoint without TLS off loopback"},
	{Name: "gitlab-url", Kind: String, Default: "https://gitlab.com", Usage: "GitLab instance of GitLabService: sessions' git remotes on its host name their project (docs/gitlab.md)"},
	{Name: "gitlab-token", Kind: String, Secret: true, Usage: "GitLab access token with the read_api scope (prefer BETCODE_GITLAB_TOKEN or --gitlab-token-file: flags show in ps); never logged",
		ReadOnly: "a secret: set BETCODE_GITLAB_TOKEN, gitlab-token-file or the --config file"},
	{Name: "gitlab-token-file", Kind: String, Usage: "file holding the GitLab access token (instead of gitlab-token)"},
	{Name: "voice-transcribe-url", Kind: String, Usage: "OpenAI-compatible speech-to-text endpoint that transcribes paired devices' dictation, e.g. https://api.openai.com/v1/audio/transcriptions or a local Whisper server's; the audio comes end to end from the device, never through the relay in clear (docs/security.md); empty: voice is not configured",
		ReadOnly: "it decides where dictated audio goes: set it on the machine (--voice-transcribe-url or the --config file)"},
	{Name: "voice-model", Kind: String, Default: "whisper-1", Usage: "model of voice-transcribe-url's requests", Check: noSpace},
	{Name: "voice-api-key", Kind: String, Secret: true, Usage: "API key of voice-transcribe-url, sent as a bearer token (prefer BETCODE_VOICE_API_KEY or --voice-api-key-file: flags show in ps); never logged",
		ReadOnly: "a secret: set BETCODE_VOICE_API_KEY, voice-api-key-file or the --config file"},
	{Name: "voice-api-key-file", Kind: String, Usage: "file holding the API key of voice-transcribe-url (instead of voice-api-key), read at each transcription"},
	{Name: "voice-timeout", Kind: Duration, Default: 60 * time.Second, Usage: "longest wait for voice-transcribe-url's answer, upload included (0: 60s)", Check: nonNegative},
	{Name: "config", Kind: String, Usage: "config file (YAML, TOML or JSON) with these keys", ReadOnly: "it names the file the other settings come from"},
}

// checkACPAgents accepts NAME=COMMAND [ARGS...] values with distinct names.
func checkACPAgents(v any) error {
	seen := map[string]bool{}
	for _, s := range v.([]string) {
		a, err := acp.ParseAgent(s)
		if err != nil {
			return err
		}
		if seen[a.Name] {
			return fmt.Errorf("acp agent %s is named twice", a.Name)
		}
		seen[a.Name] = true
	}
	return nil
}

// checkFeatureFlags accepts flag names (the daemon refuses unknown ones
// with the list of known flags).
func checkFeatureFlags(v any) error {
	for i, f := range v.([]string) {
		if f == "" || strings.ContainsAny(f, " \t=") {
			return fmt.Errorf("[%d] %q: want a flag name such as subagent_orchestration", i, f)
		}
	}
	return nil
}

// checkCost accepts "" (no limit) or a non-negative number of dollars.
func checkCost(v any) error {
	_, err := ParseCost(v.(string))
	return err
}

// MaxSubagentParallel is the highest subagent-max-parallel.
const MaxSubagentParallel = 16

// checkSubagentParallel accepts 1 to MaxSubagentParallel.
func checkSubagentParallel(v any) error {
	if n := v.(int); n < 1 || n > MaxSubagentParallel {
		return fmt.Errorf("must be 1 to %d, got %d", MaxSubagentParallel, n)
	}
	return nil
}

// ParseCost parses a subagent-max-cost-usd value: "" is 0 (no limit).
func ParseCost(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q: want a non-negative number of dollars such as 5 or 0.50", s)
	}
	return f, nil
}

// checkCodexSandbox accepts Codex's sandbox modes.
func checkCodexSandbox(v any) error {
	switch v.(string) {
	case "read-only", "workspace-write", "danger-full-access":
		return nil
	}
	return fmt.Errorf("%q: want read-only, workspace-write or danger-full-access", v)
}

// checkRelayE2E accepts the policies of relayed calls.
func checkRelayE2E(v any) error {
	if p := v.(string); p != "optional" && p != "required" {
		return fmt.Errorf("%q: want optional or required", p)
	}
	return nil
}

// checkLogFormat accepts the formats of telemetry.NewLogger.
func checkLogFormat(v any) error {
	if f := v.(string); f != "text" && f != "json" {
		return fmt.Errorf("%q: want text or json", f)
	}
	return nil
}

// checkOrigins accepts scheme://host[:port] origins.
func checkOrigins(v any) error {
	for i, o := range v.([]string) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("[%d] %q: want an origin such as https://app.example.com", i, o)
		}
	}
	return nil
}

// Lookup returns the setting named name.
func Lookup(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// DefaultValue is k's default of the Kind's Go type (never nil).
func (k Key) DefaultValue() any {
	if k.Default != nil {
		return k.Default
	}
	switch k.Kind {
	case String:
		return ""
	case StringList:
		return []string(nil)
	case Duration:
		return time.Duration(0)
	case Int:
		return 0
	case Uint:
		return uint64(0)
	case Bool:
		return false
	}
	return []any(nil)
}
