package permission

import "testing"

func TestGrantFor(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		input map[string]any
		want  string // String() of the grant
		same  Request
		other Request // a different call the grant must not allow
	}{
		{
			name: "bash exact", tool: "Bash", input: map[string]any{"command": "npm run test"},
			want: "Bash(npm run test)", same: bash("npm run test"), other: bash("npm run test --x"),
		},
		{
			name: "bash star escaped", tool: "Bash", input: map[string]any{"command": "rm *.tmp"},
			want: `Bash(rm \*.tmp)`, same: bash("rm *.tmp"), other: bash("rm a.tmp"),
		},
		{
			name: "bash compound", tool: "Bash", input: map[string]any{"command": "make && make test"},
			want: "Bash(make && make test)", same: bash("make && make test"), other: bash("make"),
		},
		{
			name: "bash compound with substitution", tool: "Bash", input: map[string]any{"command": `git commit -m "$(date)" && git push`},
			want: `Bash(git commit -m "$(date)" && git push)`, same: bash(`git commit -m "$(date)" && git push`), other: bash("git push"),
		},
		{
			name: "bash empty", tool: "Bash", input: map[string]any{},
			want: "Bash()", same: Request{}, other: bash(""),
		},
		{
			name: "edit absolute", tool: "Edit", input: map[string]any{"file_path": "/home/ana/proj/a.go"},
			want: "Edit(//home/ana/proj/a.go)", same: file("Edit", "/home/ana/proj/a.go"), other: file("Edit", "/home/ana/proj/b.go"),
		},
		{
			name: "edit grant covers the family on that path", tool: "Edit", input: map[string]any{"file_path": "/p/a.go"},
			want: "Edit(//p/a.go)", same: file("Write", "/p/a.go"), other: file("Read", "/p/a.go"),
		},
		{
			name: "write grant is write only", tool: "Write", input: map[string]any{"file_path": "/p/a.go"},
			want: "Write(//p/a.go)", same: file("Write", "/p/a.go"), other: file("Edit", "/p/a.go"),
		},
		{
			name: "write glob chars escaped", tool: "Write", input: map[string]any{"file_path": "/p/[x]*.go"},
			want: `Write(//p/\[x]\*.go)`, same: file("Write", "/p/[x]*.go"), other: file("Write", "/p/xa.go"),
		},
		{
			name: "relative path", tool: "Read", input: map[string]any{"file_path": "docs/a.md"},
			want: "Read(./docs/a.md)", same: file("Read", "docs/a.md"), other: file("Read", testCwd+"/x/docs/a.md"),
		},
		{
			name: "relative dot-dot grants nothing", tool: "Read", input: map[string]any{"file_path": "../a.md"},
			want: "Read()", same: Request{}, other: file("Read", "../a.md"),
		},
		{
			name: "notebook", tool: "NotebookEdit", input: map[string]any{"notebook_path": "/n/a.ipynb"},
			want: "NotebookEdit(//n/a.ipynb)", same: file("NotebookEdit", "/n/a.ipynb"), other: file("NotebookEdit", "/n/b.ipynb"),
		},
		{
			name: "grep without path", tool: "Grep", input: map[string]any{"pattern": "x"},
			want: "Grep(/)", same: tool("Grep"), other: file("Grep", "/etc"),
		},
		{
			name: "edit without path grants nothing", tool: "Edit", input: map[string]any{},
			want: "Edit()", same: Request{}, other: tool("Edit"),
		},
		{
			name: "webfetch", tool: "WebFetch", input: map[string]any{"url": "https://Docs.Example.com/a"},
			want: "WebFetch(domain:docs.example.com)", same: fetch("https://docs.example.com/b"), other: fetch("https://example.com/"),
		},
		{
			name: "mcp", tool: "mcp__github__create_issue", input: map[string]any{"title": "x"},
			want: "mcp__github__create_issue", same: tool("mcp__github__create_issue"), other: tool("mcp__github__delete_repo"),
		},
		{
			name: "webfetch without host grants nothing", tool: "WebFetch", input: map[string]any{"url": "not a url"},
			want: "WebFetch()", same: Request{}, other: fetch("not a url"),
		},
		{
			name: "webfetch ipv6", tool: "WebFetch", input: map[string]any{"url": "http://[::1]:8080/x"},
			want: "WebFetch(domain:[::1])", same: fetch("http://[::1]/y"), other: fetch("http://[::2]/"),
		},
		{
			name: "webfetch star host grants nothing", tool: "WebFetch", input: map[string]any{"url": "http://*.x.com/"},
			want: "WebFetch()", same: Request{}, other: fetch("http://a.x.com/"),
		},
		{
			name: "mcp server name grants nothing", tool: "mcp__github", input: nil,
			want: "mcp__github()", same: Request{}, other: tool("mcp__github__list"),
		},
		{
			name: "odd tool name grants nothing", tool: "my tool", input: nil,
			want: "my tool()", same: Request{}, other: tool("my tool"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := GrantFor(tt.tool, tt.input)
			if g.String() != tt.want || g.Behavior != Allow || g.Source != GrantSource {
				t.Fatalf("GrantFor = %q (%v, %q), want %q", g.String(), g.Behavior, g.Source, tt.want)
			}
			// Grants are stored as text: the parsed rule must be the same.
			if back, err := ParseRule(g.String(), Allow); err == nil {
				if back.String() != g.String() {
					t.Errorf("ParseRule(%q) = %q", g.String(), back.String())
				}
			} else if tt.same.Tool != "" {
				t.Errorf("grant %q does not parse: %v", g.String(), err)
			}
			e, err := mustEngine(t, Settings{}, nil, Options{}).With(g)
			if err != nil {
				t.Fatal(err)
			}
			if tt.same.Tool != "" {
				if d := e.Decide(tt.same); d.Behavior != Allow || d.Rule == nil || d.Rule.Source != GrantSource {
					t.Errorf("same call: %+v", d)
				}
			}
			if d := e.Decide(tt.other); d.Behavior != Ask {
				t.Errorf("other call %v: %v by %v", tt.other.Input, d.Behavior, d.Rule)
			}
		})
	}
}

func TestGrantDoesNotBeatDeny(t *testing.T) {
	e := mustEngine(t, Settings{Deny: []string{"Bash(rm *)"}}, nil, Options{})
	e, err := e.With(GrantFor("Bash", map[string]any{"command": "ls && rm -rf x"}))
	if err != nil {
		t.Fatal(err)
	}
	if d := e.Decide(bash("ls && rm -rf x")); d.Behavior != Deny {
		t.Errorf("got %v", d.Behavior)
	}
}
