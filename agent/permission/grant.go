package permission

import "strings"

// GrantSource is the Source of rules made by GrantFor.
const GrantSource = "session-grant"

// GrantFor builds the allow rule that an ALLOW_SESSION answer to this call
// grants: the narrowest rule that matches the call again.
//
//   - Bash: the exact command, Bash(<command>), stars escaped. It matches
//     the same command again (whitespace runs aside), also when compound.
//   - File tools: the exact path as an absolute pattern, Edit(//abs/file)
//     (a relative path becomes ./path); the search tools without a path get
//     Grep(/), the working directory. As for every Edit or Read rule, the
//     grant covers the tool's family on that path: Write as well as Edit.
//   - WebFetch: the URL's host, WebFetch(domain:host).
//   - Any other tool: the tool name.
//
// A grant is always a Claude-syntax rule whose String() parses back with
// ParseRule to the same rule, so grants can be stored as text. A call the
// grant cannot describe (a Bash call without a command, a file call without
// a path or with a relative "..", a URL without a host) gets a grant that
// matches nothing, shown as "Tool()", which does not parse.
//
// Add grants to an engine with Engine.With.
func GrantFor(tool string, input map[string]any) Rule {
	spec, ok := grantSpec(tool, input)
	if ok {
		text := tool
		if spec != "" {
			text += "(" + spec + ")"
		}
		// The rule must name exactly this tool and host: not "mcp__srv" (a
		// whole server), "*.host" or a name that only parses once trimmed.
		r, err := ParseRule(text, Allow)
		if err == nil && r.Tool == tool && r.m.tool.kind == toolExact &&
			(r.m.kind != specDomain || "domain:"+r.m.domain == spec && !r.m.sub) {
			r.Source = GrantSource
			return r
		}
	}
	// "Tool()" does not parse, so a stored grant that matches nothing stays
	// one that matches nothing.
	never := &matcher{kind: specNever, tool: toolMatcher{kind: toolExact, name: tool}}
	return Rule{Source: GrantSource, Behavior: Allow, Tool: tool, m: never}
}

// grantSpec returns the specifier of the grant for a call, "" for the tool
// name alone, and false when the call lacks what its grant would name.
func grantSpec(tool string, input map[string]any) (string, bool) {
	switch {
	case tool == "Bash":
		cmd := strings.TrimSpace(str(input, "command"))
		return strings.ReplaceAll(cmd, "*", `\*`), cmd != ""
	case pathTools[tool]:
		raw := rawPath(tool, input)
		switch {
		case strings.HasPrefix(raw, "/"):
			p, _ := pathOf(tool, input, "")
			return "/" + escapeGlob(p), true // "//abs/path"
		case raw != "":
			return "./" + escapeGlob(strings.TrimPrefix(raw, "./")), true
		case tool == "Glob" || tool == "Grep" || tool == "LS":
			return "/", true
		}
		return "", false
	case tool == "WebFetch":
		h := asciiLower(hostOf(str(input, "url")))
		return "domain:" + h, h != ""
	}
	return "", true
}

func escapeGlob(p string) string {
	if !strings.ContainsAny(p, `*?[\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(`*?[\`, p[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
