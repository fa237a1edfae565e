package permission

import (
	"errors"
	"fmt"
	"strings"
)

// Rule is one compiled permission rule. Build it with ParseRule, CCGridRule
// or GrantFor; a Rule is immutable once built and cheap to copy.
type Rule struct {
	// Source says where the rule came from, for decisions and logs:
	// "settings:allow[2]", "ccgrid:rule-1", "session-grant". Free text.
	Source   string
	Behavior Behavior
	// Tool is the tool part as written: "Bash", "mcp__github",
	// "mcp__github__*", or "*" for every tool.
	Tool string
	// Pattern is the specifier as written, without the parentheses ("" for
	// every use of the tool), or a ccgrid rule's pathPattern.
	Pattern string

	m *matcher
}

type specKind uint8

const (
	specNone    specKind = iota // every use of the tool
	specCommand                 // Bash(...)
	specPath                    // Read(...), Edit(...), ...
	specDomain                  // WebFetch(domain:...)
	specCCGrid                  // ccgrid pathPattern
	specNever                   // a grant for a call it could not describe
)

type matcher struct {
	tool   toolMatcher
	kind   specKind
	cmd    cmdPattern
	path   pathPattern
	domain string // ASCII lower case; "example.com" for "*.example.com" with sub set
	sub    bool
	ccgrid bool
}

type toolKind uint8

const (
	toolExact  toolKind = iota // the name, or with family, any tool of the family
	toolPrefix                 // names starting with name
	toolAll
)

type toolMatcher struct {
	kind   toolKind
	name   string
	family []string
}

func (t *toolMatcher) matches(name string) bool {
	switch t.kind {
	case toolAll:
		return true
	case toolPrefix:
		return strings.HasPrefix(name, t.name)
	}
	if name == t.name {
		return true
	}
	for _, f := range t.family {
		if f == name {
			return true
		}
	}
	return false
}

// ErrInvalidRule is wrapped by every error about a rule's syntax.
var ErrInvalidRule = errors.New("invalid permission rule")

func ruleError(rule, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidRule, rule, fmt.Sprintf(format, args...))
}

// ParseRule parses a rule in Claude Code's settings syntax: "Tool" or
// "Tool(specifier)". See the package documentation for the forms.
func ParseRule(s string, b Behavior) (Rule, error) {
	if !b.valid() {
		return Rule{}, ruleError(s, "behavior %v", b)
	}
	raw := strings.TrimSpace(s)
	tool, spec, hasSpec := raw, "", false
	if i := strings.IndexByte(raw, '('); i >= 0 {
		if !strings.HasSuffix(raw, ")") {
			return Rule{}, ruleError(s, `missing ")" at the end`)
		}
		tool, spec, hasSpec = strings.TrimSpace(raw[:i]), raw[i+1:len(raw)-1], true
	} else if strings.IndexByte(raw, ')') >= 0 {
		return Rule{}, ruleError(s, `")" without "("`)
	}
	tm, err := parseTool(tool)
	if err != nil {
		return Rule{}, ruleError(s, "%v", err)
	}
	m := &matcher{tool: tm}
	r := Rule{Behavior: b, Tool: tool, Pattern: spec, m: m}
	if !hasSpec {
		return r, nil
	}
	if strings.TrimSpace(spec) == "" {
		return Rule{}, ruleError(s, "empty specifier; write %q for every use of the tool", tool)
	}
	switch {
	case tm.kind != toolExact || strings.HasPrefix(tool, "mcp__"):
		return Rule{}, ruleError(s, "%s takes no specifier (MCP and wildcard rules name tools only)", tool)
	case tool == "Bash":
		if strings.TrimSpace(spec) == "*" {
			m.kind = specNone // Bash(*) is every use of Bash, even ones no wildcard may allow
			return r, nil
		}
		m.kind = specCommand
		if m.cmd, err = compileCommand(spec); err != nil {
			return Rule{}, ruleError(s, "%v", err)
		}
	case pathTools[tool]:
		m.kind = specPath
		if m.path, err = compileClaudePath(spec); err != nil {
			return Rule{}, ruleError(s, "%v", err)
		}
	case tool == "WebFetch":
		d, ok := strings.CutPrefix(spec, "domain:")
		d = asciiLower(strings.TrimSpace(d))
		ipv6 := strings.HasPrefix(d, "[") && strings.HasSuffix(d, "]") && !strings.ContainsAny(d, "/ *")
		if !ok || d == "" || !ipv6 && strings.ContainsAny(d, "/: ") {
			return Rule{}, ruleError(s, `WebFetch takes "domain:<host>", e.g. WebFetch(domain:example.com)`)
		}
		m.kind = specDomain
		if rest, ok := strings.CutPrefix(d, "*."); ok {
			d, m.sub = rest, true
		}
		if d == "" || strings.Contains(d, "*") {
			return Rule{}, ruleError(s, `a domain wildcard must be a leading "*.", as in *.example.com`)
		}
		m.domain = d
	default:
		return Rule{}, ruleError(s, "specifiers are supported for Bash, WebFetch and the file tools (%s), not %s", "Read, Edit, Write, MultiEdit, NotebookEdit, NotebookRead, Glob, Grep, LS", tool)
	}
	return r, nil
}

// parseTool parses the tool part of a rule.
func parseTool(tool string) (toolMatcher, error) {
	if tool == "" {
		return toolMatcher{}, errors.New("missing tool name")
	}
	if tool == "*" {
		return toolMatcher{kind: toolAll}, nil
	}
	name, star := strings.CutSuffix(tool, "*")
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return toolMatcher{}, fmt.Errorf("tool name %q: character %q is not allowed (a '*' may only end it)", tool, c)
		}
	}
	if name == "" {
		return toolMatcher{}, errors.New("missing tool name")
	}
	if star {
		return toolMatcher{kind: toolPrefix, name: name}, nil
	}
	// mcp__server names every tool of the server.
	if srv, ok := strings.CutPrefix(name, "mcp__"); ok && srv != "" && !strings.Contains(srv, "__") {
		return toolMatcher{kind: toolPrefix, name: name + "__"}, nil
	}
	return toolMatcher{kind: toolExact, name: name, family: family(name)}, nil
}

// CCGridRule builds a rule from ccgrid's {toolName, pathPattern, behavior}.
// toolName "*" matches every tool, any other name exactly that tool. An
// empty pathPattern (or "*", "**") matches every call; otherwise the pattern
// is matched against the file path in the call's input (file_path,
// notebook_path or path), and a call without one does not match.
func CCGridRule(id, toolName, pathPattern, behavior string) (Rule, error) {
	desc := fmt.Sprintf("ccgrid %s", id)
	b, err := ParseBehavior(behavior)
	if err != nil {
		return Rule{}, ruleError(desc, "%v", err)
	}
	m := &matcher{ccgrid: true}
	switch {
	case toolName == "*":
		m.tool = toolMatcher{kind: toolAll}
	case toolName == "" || strings.ContainsAny(toolName, "()* \t"):
		return Rule{}, ruleError(desc, "toolName %q: want a tool name or \"*\"", toolName)
	default:
		m.tool = toolMatcher{kind: toolExact, name: toolName}
	}
	p, all, err := compileCCGridPath(pathPattern)
	if err != nil {
		return Rule{}, ruleError(desc, "pathPattern %q: %v", pathPattern, err)
	}
	if !all {
		m.kind, m.path = specCCGrid, p
	}
	return Rule{Source: "ccgrid:" + id, Behavior: b, Tool: toolName, Pattern: pathPattern, m: m}, nil
}

// String returns the rule in the syntax it came from: "Tool(pattern)" for
// Claude rules, "ccgrid{tool=..., path=...}" for ccgrid rules.
func (r Rule) String() string {
	if r.m != nil && r.m.ccgrid {
		return fmt.Sprintf("ccgrid{tool=%s path=%q %s}", r.Tool, r.Pattern, r.Behavior)
	}
	if r.Pattern == "" && (r.m == nil || r.m.kind != specNever) {
		return r.Tool
	}
	return r.Tool + "(" + r.Pattern + ")"
}

// Settings is the "permissions" object of a Claude Code settings.json.
type Settings struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// Rules parses every rule, naming each "settings:allow[2]" and so on. It
// returns the rules that parsed and one error joining every failure, so a
// caller may choose to run with the valid ones.
func (s Settings) Rules() ([]Rule, error) {
	var rules []Rule
	var errs []error
	for _, l := range []struct {
		name string
		b    Behavior
		list []string
	}{{"deny", Deny, s.Deny}, {"ask", Ask, s.Ask}, {"allow", Allow, s.Allow}} {
		for i, text := range l.list {
			r, err := ParseRule(text, l.b)
			if err != nil {
				errs = append(errs, fmt.Errorf("settings %s[%d]: %w", l.name, i, err))
				continue
			}
			r.Source = fmt.Sprintf("settings:%s[%d]", l.name, i)
			rules = append(rules, r)
		}
	}
	return rules, errors.Join(errs...)
}
