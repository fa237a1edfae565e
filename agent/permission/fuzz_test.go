package permission

import (
	"strings"
	"testing"
)

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"Bash", "Bash(npm run test:*)", "Bash(git * main)", `Bash(ls \*)`, "Bash(a && b)",
		"Read(**/*.md)", "Read(//etc/**)", "Read(~/.ssh/**)", "Edit(/src/[a-z]?.ts)", "Read([!x]",
		"WebFetch(domain:*.example.com)", "mcp__github", "mcp__x__*", "*", "Bash((((", "Read(a\\",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s, Deny)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String(), Deny)
		if err != nil {
			t.Fatalf("ParseRule(%q).String() = %q does not parse: %v", s, r.String(), err)
		}
		if again.String() != r.String() {
			t.Fatalf("round trip %q -> %q", r.String(), again.String())
		}
		e, err := New([]Rule{r}, Options{Home: testHome})
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []Request{bash(s), file("Read", "/"+s), file("Edit", s), fetch("https://" + s), tool(r.Tool)} {
			if d := e.Decide(req); d.Behavior == Allow {
				t.Fatalf("a deny rule allowed %v", req)
			}
		}
	})
}

// FuzzDecide decides fuzzed calls against a fuzzed rule and checks that
// Decide never panics and keeps its invariants.
func FuzzDecide(f *testing.F) {
	f.Add("Bash(git *)", "Bash", "git status && rm -rf /", testCwd)
	f.Add("Read(*.md)", "Read", testCwd+"/a/b.md", testCwd)
	f.Add("Edit(//tmp/**)", "Write", "../../tmp/x", "/a/b")
	f.Add("WebFetch(domain:x.com)", "WebFetch", "https://x.com:1/", "")
	f.Add("mcp__s", "mcp__s__t", "", "relative")
	f.Add("Bash(echo *)", "Bash", "echo $(a `b` <(c)) > f 2>&1 &>/dev/null", "/")
	f.Add("Bash(x:*)", "Bash", "(((x ; } ) fi \\\n '\"", testCwd)
	f.Fuzz(func(t *testing.T, ruleText, toolName, arg, cwd string) {
		input := map[string]any{"command": arg, "file_path": arg, "notebook_path": arg, "path": arg, "url": arg}
		req := Request{Tool: toolName, Input: input, Cwd: cwd}
		rule, ruleErr := ParseRule(ruleText, Allow)
		var rules []Rule
		if ruleErr == nil {
			rules = append(rules, rule)
		}

		allowOnly, err := New(rules, Options{Home: testHome})
		if err != nil {
			t.Fatal(err)
		}
		d := allowOnly.Decide(req)
		if d.Behavior == Deny || (d.Rule == nil) != (d.Behavior == Ask) {
			t.Fatalf("allow-only engine: %+v", d)
		}

		denyAll, err := allowOnly.With(must(ParseRule("*", Deny)))
		if err != nil {
			t.Fatal(err)
		}
		if d := denyAll.Decide(req); d.Behavior != Deny {
			t.Fatalf("deny * gave %v", d.Behavior)
		}

		// A session grant allows the call it was made for.
		g := GrantFor(toolName, input)
		granted, err := New([]Rule{g}, Options{Home: testHome})
		if err != nil {
			t.Fatal(err)
		}
		d = granted.Decide(req)
		if wantAllowed(g, toolName, arg, cwd) && d.Behavior != Allow {
			t.Fatalf("grant %s did not allow its own call: %+v", g, d)
		}
		// Grants are stored as text; the parsed grant decides the same.
		if back, err := ParseRule(g.String(), Allow); err == nil {
			e, err := New([]Rule{back}, Options{Home: testHome})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Decide(req); got.Behavior != d.Behavior {
				t.Fatalf("grant %s decides %v, parsed back %v", g, d.Behavior, got.Behavior)
			}
		} else if g.m.kind != specNever {
			t.Fatalf("grant %s does not parse: %v", g, err)
		}

		// Appending a denied command is never allowed, whatever came first,
		// as long as the first command is not cut short by an open quote
		// or an escape.
		if toolName == "Bash" && ruleErr == nil && balanced(arg) {
			withDeny, err := allowOnly.With(must(ParseRule("Bash(rm:*)", Deny)))
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{" && ", "; ", " | ", "\n", " || ", " & "} {
				if d := withDeny.Decide(bash(arg + op + "rm -rf /")); d.Behavior != Deny {
					t.Fatalf("%q: %v", arg+op+"rm -rf /", d.Behavior)
				}
			}
		}
	})
}

func must(r Rule, err error) Rule {
	if err != nil {
		panic(err)
	}
	return r
}

// wantAllowed reports whether a grant must allow the call it was made for.
func wantAllowed(g Rule, tool, arg, cwd string) bool {
	switch g.m.kind {
	case specNever:
		return false
	case specPath:
		if strings.HasPrefix(g.Pattern, "./") && cleanDir(cwd) == "" {
			return false // a relative path without a cwd names no file
		}
	case specDomain, specNone:
	case specCommand:
	}
	return true
}

// balanced reports whether s has no open quote, substitution or trailing
// escape at its end, so that what follows it is a new command.
func balanced(s string) bool {
	inS, inD, depth := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inS:
			inS = c != '\''
		case c == '\\':
			i++
			if i >= len(s) {
				return false
			}
		case c == '`':
			return false
		case c == '(':
			depth++
		case c == ')':
			depth--
		case inD:
			inD = c != '"'
		case c == '\'':
			inS = true
		case c == '"':
			inD = true
		}
	}
	return !inS && !inD && depth == 0
}
