package config

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Markdown renders docs/configuration.md from Keys.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`<!-- Generated from agent/config/keys.go by ` + "`go generate ./agent/config`" + `; do not edit. -->
# Configuration of betcode-agent

Every setting of ` + "`betcode-agent serve`" + ` is a key below. Where a value comes from, highest
precedence first:

1. a command-line flag (` + "`--permission-timeout 30s`" + `);
2. an environment variable (` + "`BETCODE_PERMISSION_TIMEOUT=30s`" + `; list values separated by spaces);
3. the settings file ` + "`<data-dir>/settings.json`" + `, which ConfigService's ` + "`UpdateSettings`" + ` writes
   (mode 0600, replaced atomically; JSON, durations as strings such as ` + "`\"30s\"`" + `);
4. the ` + "`--config`" + ` file (YAML, TOML or JSON, same keys);
5. the default.

` + "`UpdateSettings`" + ` (through the relay too) validates every value first and answers
` + "`INVALID_ARGUMENT`" + ` naming the key; it stores the changed keys in the settings file and applies
the **hot** ones at once (the next permission decision, the next session, the next turn). The
others are listed in the answer's ` + "`restart_required`" + ` and take effect when the agent restarts. A
key that a flag or an environment variable sets is stored but stays overridden (listed in
` + "`overridden`" + `). ` + "`GetSettings`" + ` reports each key's value in effect and its source. In
` + "`update_mask`" + `, a key is named ` + "`extra.<key>`" + ` (or by its Settings field: ` + "`default_model`" + `,
` + "`max_concurrent_sessions`" + `, ` + "`auto_compact_threshold`" + `, ` + "`permissions.allow`" + `, ` + "`permissions.deny`" + `,
` + "`permissions.ask`" + `).

| key | type | default | environment | flag | hot | meaning |
| --- | --- | --- | --- | --- | --- | --- |
`)
	for _, k := range Keys {
		hot := "no"
		if k.Hot {
			hot = "yes"
		}
		if k.ReadOnly != "" {
			hot = "read-only"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n",
			k.Name, k.Kind, defaultDoc(k), code(k.Env()), code(k.Flag()), hot, cell(k.Usage))
	}
	b.WriteString(`
Read-only keys, which ConfigService cannot change:
`)
	for _, k := range Keys {
		if k.ReadOnly != "" {
			fmt.Fprintf(&b, "- `%s`: %s.\n", k.Name, k.ReadOnly)
		}
	}
	b.WriteString(`
When a hot change takes effect: ` + "`model`" + ` for sessions created afterwards; ` + "`allow`" + `, ` + "`deny`" + ` and
` + "`ask`" + ` at the next permission decision of every session, running ones included (each keeps its
ALLOW_SESSION grants); ` + "`permission-timeout`" + ` for requests made afterwards; ` + "`auto-compact-tokens`" + ` for
turns that end afterwards.

## ConfigService and Claude Code's own files

- ` + "`GetSettings`" + ` with scope unspecified or ` + "`CONFIG_SCOPE_USER`" + ` returns the settings above (` + "`extra`" + ` holds
  every key, ` + "`values`" + ` each key's source and whether a stored change waits for a restart). With
  ` + "`CONFIG_SCOPE_PROJECT`" + ` or ` + "`CONFIG_SCOPE_LOCAL`" + ` and a ` + "`working_directory`" + ` it returns Claude Code's
  ` + "`<dir>/.claude/settings.json`" + ` or ` + "`settings.local.json`" + ` (model, env, permissions; other keys in
  ` + "`extra`" + `). Only the user scope can be written.
- ` + "`ListMcpServers`" + ` reads what Claude Code reads: ` + "`~/.claude.json`" + ` ` + "`mcpServers`" + ` (user scope), its
  ` + "`projects[<dir>].mcpServers`" + ` (local scope) and ` + "`<dir>/.mcp.json`" + ` (project scope); a name in
  several scopes is taken from local, then project, then user. Servers rejected by
  ` + "`disabledMcpjsonServers`" + ` or switched off by ` + "`disabledMcpServers`" + ` are DISABLED, ones that cannot start
  as configured FAILED; the agent does not connect to them. Environment values are redacted unless
  they only reference a variable (` + "`${TOKEN}`" + `).
- ` + "`GetPermissions`" + ` returns the agent's rules (` + "`allow`" + `/` + "`deny`" + `/` + "`ask`" + `, and ` + "`permission_rules`" + ` in
  package permission's notation), Claude Code's ` + "`~/.claude/settings.json`" + ` rules, with a
  ` + "`working_directory`" + ` the project's and local settings' rules, and with a ` + "`session_id`" + ` that session's
  ALLOW_SESSION grants; ` + "`default_mode`" + ` is the most specific settings file's.

The client CLI wraps these: ` + "`betcode config get [KEY]`" + `, ` + "`betcode config set KEY VALUE...`" + `,
` + "`betcode config mcp [--cwd DIR]`" + `, ` + "`betcode config permissions [--cwd DIR] [--session ID]`" + `.
`)
	return b.Bytes()
}

func defaultDoc(k Key) string {
	if k.DefaultDoc != "" {
		return k.DefaultDoc
	}
	switch v := k.DefaultValue().(type) {
	case string:
		if v == "" {
			return "empty"
		}
		return code(v)
	case time.Duration:
		return code(v.String())
	case []string, []any:
		return "none"
	default:
		return code(fmt.Sprint(v))
	}
}

func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + s + "`"
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
