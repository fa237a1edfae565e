package permission

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// benchSettings is a realistic rule set of 100 rules: a project's Bash
// allow-list with guard rails, file rules, fetch domains, MCP servers and a
// few ccgrid rules.
func benchSettings() (Settings, []ccgrid) {
	s := Settings{
		Allow: []string{
			"Bash(git status)", "Bash(git diff *)", "Bash(git log *)", "Bash(git show *)", "Bash(git add *)",
			"Bash(git commit *)", "Bash(git branch *)", "Bash(git checkout *)", "Bash(git fetch *)", "Bash(git stash *)",
			"Bash(npm run test:*)", "Bash(npm run build:*)", "Bash(npm run lint:*)", "Bash(npm ci)", "Bash(npm install)",
			"Bash(go test *)", "Bash(go build *)", "Bash(go vet *)", "Bash(gofmt *)", "Bash(go mod tidy)",
			"Bash(cargo *)", "Bash(make *)", "Bash(ls *)", "Bash(cat *)", "Bash(head *)",
			"Bash(tail *)", "Bash(grep *)", "Bash(rg *)", "Bash(find *)", "Bash(wc *)",
			"Bash(echo *)", "Bash(pwd)", "Bash(which *)", "Bash(* --version)", "Bash(docker ps *)",
			"Read(**)", "Read(//tmp/**)", "Read(~/.config/**)", "Edit(src/**)", "Edit(/docs/**/*.md)",
			"Edit(test/**)", "Write(//tmp/**)", "Edit(*.go)", "Edit(*.ts)", "NotebookEdit(notebooks/**)",
			"WebFetch(domain:github.com)", "WebFetch(domain:*.github.io)", "WebFetch(domain:pkg.go.dev)", "WebFetch(domain:docs.python.org)", "WebFetch(domain:developer.mozilla.org)",
			"mcp__github", "mcp__linear__list_issues", "mcp__linear__get_issue", "mcp__sentry__*", "Glob",
			"Grep", "WebSearch", "TodoWrite",
		},
		Ask: []string{
			"Bash(git push:*)", "Bash(git reset *)", "Bash(git rebase *)", "Bash(npm publish *)", "Bash(docker run *)",
			"Bash(kubectl *)", "Bash(terraform *)", "Edit(package.json)", "Edit(go.mod)", "Edit(.github/**)",
			"mcp__github__merge_pull_request", "WebFetch(domain:*.internal.example.com)",
		},
		Deny: []string{
			"Bash(rm -rf *)", "Bash(sudo *)", "Bash(nc *)", "Bash(chmod 777 *)", "Bash(dd *)",
			"Bash(mkfs *)", "Bash(git push --force *)", "Bash(* > /dev/sda)", "Read(.env)", "Read(.env.*)",
			"Read(~/.ssh/**)", "Read(~/.aws/**)", "Read(//etc/shadow)", "Edit(.env)", "Edit(//etc/**)",
			"Read(**/secrets/**)", "Edit(**/*.pem)", "Read(*.key)", "mcp__github__delete_repo", "WebFetch(domain:evil.example)",
			"Bash(shutdown *)", "Bash(reboot)",
		},
	}
	cc := []ccgrid{
		{"rule-1", "Read", "**/*.test.ts", "allow"},
		{"rule-2", "Write", "/etc/**", "deny"},
		{"rule-3", "Edit", "**/node_modules/**", "deny"},
		{"rule-4", "Bash", "**", "ask"},
		{"rule-5", "*", "/var/lib/**", "deny"},
		{"rule-6", "Write", "/home/ana/proj/dist/**", "allow"},
		{"rule-7", "Read", "/home/ana/notes/**", "allow"},
		{"rule-8", "NotebookEdit", "**/*.ipynb", "ask"},
	}
	return s, cc
}

func benchEngine(t testing.TB) *Engine {
	s, cc := benchSettings()
	// The ccgrid "Bash **" ask rule would ask for every command; drop it
	// from the engine but keep it counted as a compiled rule to stay at 100.
	e := mustEngine(t, s, cc[:3], Options{})
	rest := make([]Rule, 0, len(cc)-3)
	for _, c := range cc[3:] {
		if c.tool == "Bash" {
			c.behavior = "allow"
			c.path = "/never/**"
		}
		r, err := CCGridRule(c.id, c.tool, c.path, c.behavior)
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, r)
	}
	e, err := e.With(rest...)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.Rules()); n != 100 {
		t.Fatalf("bench engine has %d rules, want 100", n)
	}
	return e
}

func benchRequests() []Request {
	return []Request{
		bash("git status"),
		bash("git diff --stat HEAD~1"),
		bash("npm run test -- --watch=false"),
		bash("go test ./... 2>&1 | tail -20"),
		bash("cd sub && make build"),
		bash("git status && rm -rf /"),
		bash("sudo apt-get install x"),
		bash("git push origin main"),
		bash("python3 script.py"),
		bash(`git commit -m "fix: handle && in names"`),
		file("Read", "/home/ana/proj/src/main.go"),
		file("Read", "/home/ana/proj/.env"),
		file("Read", "/home/ana/.ssh/id_ed25519"),
		file("Edit", "/home/ana/proj/src/pkg/handler.go"),
		file("Write", "/etc/hosts"),
		file("Edit", "/home/ana/proj/package.json"),
		file("Grep", "/home/ana/proj"),
		fetch("https://github.com/anthropics/claude-code/issues"),
		fetch("https://evil.example/x"),
		tool("mcp__github__create_issue"),
		tool("mcp__linear__delete_issue"),
		tool("WebSearch"),
	}
}

// BenchmarkDecide100Rules decides a mix of requests against 100 rules. One
// op is one Decide; every decision is taken against the whole rule set
// (the engine's per-tool index is part of what is measured).
func BenchmarkDecide100Rules(b *testing.B) {
	e := benchEngine(b)
	reqs := benchRequests()
	b.ReportAllocs()
	i := 0
	var cpu time.Duration
	for b.Loop() {
		if i == 0 {
			cpu = processCPU()
		}
		e.Decide(reqs[i%len(reqs)])
		i++
	}
	cpu = processCPU() - cpu
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	if cpu > 0 {
		// Wall-clock throughput undercounts on a shared machine; this is
		// the rate per second of CPU the process actually got.
		b.ReportMetric(float64(i)/cpu.Seconds(), "decisions/cpu-s")
	}
}

// BenchmarkDecideKind splits the mix by tool to show where time goes.
func BenchmarkDecideKind(b *testing.B) {
	e := benchEngine(b)
	for _, r := range benchRequests() {
		name := fmt.Sprintf("%s/%.40v", r.Tool, r.Input)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Decide(r)
			}
		})
	}
}

func BenchmarkNew100Rules(b *testing.B) {
	e := benchEngine(b)
	rules := e.Rules()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(rules, Options{Home: testHome}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideLatency times every decision of the mix and reports the
// percentiles the target is stated in (p99 under 1 ms). The timer
// calls themselves add some tens of nanoseconds to each sample.
func BenchmarkDecideLatency(b *testing.B) {
	e := benchEngine(b)
	reqs := benchRequests()
	samples := make([]time.Duration, 0, 1<<20)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		e.Decide(reqs[i%len(reqs)])
		d := time.Since(t0)
		if len(samples) < cap(samples) {
			samples = append(samples, d)
		}
		i++
	}
	slices.Sort(samples)
	pct := func(p float64) float64 { return float64(samples[int(p*float64(len(samples)-1))].Nanoseconds()) }
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
	b.ReportMetric(pct(0.999), "p99.9-ns")
	b.ReportMetric(pct(1), "max-ns")
}
