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
//     (relative paths become ./path); the search tools without a path get
//     Grep(/), the working directory. The rule names the same tool, not its
//     family: a grant for Write does not cover Edit.
//   - WebFetch: the URL's host, WebFetch(domain:host).
//   - Any other tool, and a call without the usual field: the tool name.
//
// Add grants to an engine with Engine.With.
func GrantFor(tool string, input map[string]any) Rule {
	exact := &matcher{tool: toolMatcher{kind: toolExact, name: tool}}
	r := Rule{Source: GrantSource, Behavior: Allow, Tool: tool, m: exact}
	switch {
	case tool == "Bash":
		cmd := strings.TrimSpace(str(input, "command"))
		r.Pattern = strings.ReplaceAll(cmd, "*", `\*`)
		p, err := compileCommand(r.Pattern)
		if err != nil { // an empty command: grant nothing
			exact.kind = specNever
			return r
		}
		exact.kind, exact.cmd = specCommand, p
	case pathTools[tool]:
		p, ok := pathOf(tool, input, "")
		raw := rawPath(tool, input)
		switch {
		case ok:
			r.Pattern = "/" + escapeGlob(p) // "//abs/path"
		case raw != "" && !strings.HasPrefix(raw, "/"):
			r.Pattern = "./" + escapeGlob(strings.TrimPrefix(raw, "./"))
		case tool == "Glob" || tool == "Grep" || tool == "LS":
			r.Pattern = "/"
		default:
			return r
		}
		pp, err := compileClaudePath(r.Pattern)
		if err != nil { // a relative path with "..": grant nothing
			exact.kind = specNever
			return r
		}
		exact.kind, exact.path = specPath, pp
	case tool == "WebFetch":
		if h := asciiLower(hostOf(str(input, "url"))); h != "" && !strings.ContainsAny(h, "/: ") {
			r.Pattern = "domain:" + h
			exact.kind, exact.domain = specDomain, h
		}
	}
	return r
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
