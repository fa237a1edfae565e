package permission

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in       string
		tool     string
		pattern  string
		kind     specKind
		toolKind toolKind
		str      string // String(), when it differs from in
	}{
		{in: "Bash", tool: "Bash", kind: specNone},
		{in: "  Bash  ", tool: "Bash", kind: specNone, str: "Bash"},
		{in: "Bash(*)", tool: "Bash", pattern: "*", kind: specNone},
		{in: "Bash(npm run test)", tool: "Bash", pattern: "npm run test", kind: specCommand},
		{in: "Bash(npm run test:*)", tool: "Bash", pattern: "npm run test:*", kind: specCommand},
		{in: "Bash(echo (a))", tool: "Bash", pattern: "echo (a)", kind: specCommand},
		{in: "Bash(a && b)", tool: "Bash", pattern: "a && b", kind: specCommand},
		{in: "Read(**/*.md)", tool: "Read", pattern: "**/*.md", kind: specPath},
		{in: "Read(//etc/**)", tool: "Read", pattern: "//etc/**", kind: specPath},
		{in: "Read(~/.ssh/**)", tool: "Read", pattern: "~/.ssh/**", kind: specPath},
		{in: "Edit(/src/[a-z]*.ts)", tool: "Edit", pattern: "/src/[a-z]*.ts", kind: specPath},
		{in: "Glob(/)", tool: "Glob", pattern: "/", kind: specPath},
		{in: "WebFetch(domain:example.com)", tool: "WebFetch", pattern: "domain:example.com", kind: specDomain},
		{in: "WebFetch(domain:*.example.com)", tool: "WebFetch", pattern: "domain:*.example.com", kind: specDomain},
		{in: "mcp__github", tool: "mcp__github", toolKind: toolPrefix},
		{in: "mcp__github__*", tool: "mcp__github__*", toolKind: toolPrefix},
		{in: "mcp__github__list_issues", tool: "mcp__github__list_issues", toolKind: toolExact},
		{in: "mcp__my-server__do_it", tool: "mcp__my-server__do_it", toolKind: toolExact},
		{in: "*", tool: "*", toolKind: toolAll},
		{in: "WebSearch", tool: "WebSearch"},
		{in: "Task", tool: "Task"},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in, Allow)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		want := tt.str
		if want == "" {
			want = tt.in
		}
		if r.Tool != tt.tool || r.Pattern != tt.pattern || r.m.kind != tt.kind || r.m.tool.kind != tt.toolKind || r.String() != want || r.Behavior != Allow {
			t.Errorf("ParseRule(%q) = tool %q pattern %q kind %v toolKind %v string %q", tt.in, r.Tool, r.Pattern, r.m.kind, r.m.tool.kind, r.String())
		}
		again, err := ParseRule(r.String(), Deny)
		if err != nil || again.String() != r.String() {
			t.Errorf("ParseRule(%q).String() does not round-trip: %v", tt.in, err)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string // in the message
	}{
		{"", "missing tool name"},
		{"()", "missing tool name"},
		{"(ls)", "missing tool name"},
		{"Bash(ls", `missing ")"`},
		{"Bash)", `")" without "("`},
		{"Bash()", "empty specifier"},
		{"Bash(   )", "empty specifier"},
		{"Bash(:*)", "empty command prefix"},
		{"Bash(git * && rm *)", "can never match"},
		{"Bash(git * ; x)", "can never match"},
		{"Bash(echo $(*))", "can never match"},
		{"Ba sh", "not allowed"},
		{"Bash!", "not allowed"},
		{"B*sh", "not allowed"},
		{"*(x)", "takes no specifier"},
		{"mcp__github(x)", "takes no specifier"},
		{"mcp__github__list(x)", "takes no specifier"},
		{"mcp__x__*(y)", "takes no specifier"},
		{"WebSearch(x)", "specifiers are supported for"},
		{"Task(Explore)", "specifiers are supported for"},
		{"WebFetch(example.com)", `WebFetch takes "domain:<host>"`},
		{"WebFetch(domain:)", `WebFetch takes "domain:<host>"`},
		{"WebFetch(domain:https://x.com)", `WebFetch takes "domain:<host>"`},
		{"WebFetch(domain:x.*.com)", "leading"},
		{"WebFetch(domain:*.)", "leading"},
		{"Read(../x)", `".." is not supported`},
		{"Read(//a/../b)", `".." is not supported`},
		{"Read([a-)", "unclosed"},
		{"Read([z-a])", "bad range"},
		{`Read(a\)`, `ends with "\"`},
	}
	for _, tt := range tests {
		_, err := ParseRule(tt.in, Deny)
		if err == nil {
			t.Errorf("ParseRule(%q) = nil error, want %q", tt.in, tt.want)
			continue
		}
		if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
			t.Errorf("ParseRule(%q) = %v, want ErrInvalidRule naming the rule and %q", tt.in, err, tt.want)
		}
	}
	if _, err := ParseRule("Bash", Behavior(9)); err == nil {
		t.Error("ParseRule accepted behavior 9")
	}
}

func TestCCGridRule(t *testing.T) {
	r, err := CCGridRule("rule-1", "Read", "**/*.md", "allow")
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "ccgrid:rule-1" || r.Behavior != Allow || r.Tool != "Read" || r.Pattern != "**/*.md" {
		t.Errorf("got %+v", r)
	}
	for _, tt := range []struct{ tool, path, behavior, want string }{
		{"Read", "", "maybe", "unknown permission behavior"},
		{"", "", "allow", "toolName"},
		{"Bash(ls)", "", "allow", "toolName"},
		{"Re*", "", "allow", "toolName"},
		{"Read", "/a/../b", "allow", `".."`},
		{"Read", "/a/[b", "allow", "unclosed"},
	} {
		_, err := CCGridRule("r", tt.tool, tt.path, tt.behavior)
		if err == nil || !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CCGridRule(%q, %q, %q) = %v, want %q", tt.tool, tt.path, tt.behavior, err, tt.want)
		}
	}
}

func TestSettingsRules(t *testing.T) {
	s := Settings{
		Allow: []string{"Bash(ls *)", "Read(../x)", "Read"},
		Deny:  []string{"Bash(rm *)"},
		Ask:   []string{"WebFetch(x)"},
	}
	rules, err := s.Rules()
	var sources []string
	for _, r := range rules {
		sources = append(sources, r.Source+"="+r.Behavior.String())
	}
	if got, want := strings.Join(sources, " "), "settings:deny[0]=deny settings:allow[0]=allow settings:allow[2]=allow"; got != want {
		t.Errorf("sources %q, want %q", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "settings allow[1]") || !strings.Contains(err.Error(), "settings ask[0]") {
		t.Errorf("error %v, want both bad rules named", err)
	}
}

func TestBehavior(t *testing.T) {
	for _, b := range []Behavior{Ask, Allow, Deny} {
		got, err := ParseBehavior(" " + strings.ToUpper(b.String()) + " ")
		if err != nil || got != b {
			t.Errorf("ParseBehavior(%v) = %v, %v", b, got, err)
		}
	}
	if _, err := ParseBehavior("yes"); err == nil {
		t.Error("ParseBehavior(yes) = nil error")
	}
	if Behavior(5).String() != "Behavior(5)" {
		t.Error(Behavior(5).String())
	}
}
