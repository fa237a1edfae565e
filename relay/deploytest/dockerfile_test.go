package deploytest

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

// stage is one FROM ... [AS name] of a Dockerfile.
type stage struct {
	name, from string
	instrs     []instruction
}

// parseDockerfile reads path into its stages (docker is not installed
// here: this reads the file as docker's parser does for these few rules).
func parseDockerfile(t *testing.T, path string) []*stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []*stage
	var cur strings.Builder
	start, n := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(l)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			s := &stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "as") {
				s.name = fields[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before FROM", path, in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: ends in a continuation line", path)
	}
	return stages
}

func (s *stage) last(cmd string) *instruction {
	var found *instruction
	for i := range s.instrs {
		if s.instrs[i].cmd == cmd {
			found = &s.instrs[i]
		}
	}
	return found
}

// dockerfiles are the images and the stages that are run (the others only
// build).
var dockerfiles = []struct {
	path        string
	runStages   []string // "" is the last stage
	healthcheck bool     // the last stage has one
}{
	{path: "deploy/Dockerfile.relay", runStages: []string{""}, healthcheck: true},
	{path: "deploy/agent/Dockerfile", runStages: []string{"", "fakeapi"}, healthcheck: true},
}

var goBuild = regexp.MustCompile(`\bgo build\b`)

// TestDockerfiles: Go built static (CGO_ENABLED=0), every stage that runs
// runs as a non-root user, exec-form entrypoints, a health check, and
// every file copied from the build context exists.
func TestDockerfiles(t *testing.T) {
	for _, df := range dockerfiles {
		t.Run(df.path, func(t *testing.T) {
			stages := parseDockerfile(t, filepath.Join(repo, df.path))
			byName := map[string]*stage{"": stages[len(stages)-1]}
			for _, s := range stages {
				if s.name != "" {
					byName[s.name] = s
				}
				for _, in := range s.instrs {
					if in.cmd == "RUN" && goBuild.MatchString(in.args) && !strings.Contains(in.args, "CGO_ENABLED=0") {
						t.Errorf("line %d: go build without CGO_ENABLED=0 (not static): %s", in.line, in.args)
					}
					if in.cmd == "COPY" && !strings.Contains(in.args, "--from=") {
						fields := strings.Fields(in.args)
						for _, src := range fields[:len(fields)-1] {
							if _, err := os.Stat(filepath.Join(repo, src)); err != nil {
								t.Errorf("line %d: COPY %s: not in the build context: %v", in.line, src, err)
							}
						}
					}
				}
			}
			for _, name := range df.runStages {
				s, ok := byName[name]
				if !ok {
					t.Fatalf("no stage %q", name)
				}
				u := s.last("USER")
				if u == nil {
					t.Errorf("stage %q (%s) runs as its base image's user: set USER", name, s.from)
				} else if user, _, _ := strings.Cut(u.args, ":"); user == "root" || user == "0" {
					t.Errorf("stage %q runs as root", name)
				}
				if e := s.last("ENTRYPOINT"); e == nil || !strings.HasPrefix(e.args, "[") {
					t.Errorf("stage %q: want an exec-form ENTRYPOINT (signals reach the process), got %v", name, e)
				}
			}
			if df.healthcheck {
				h := byName[""].last("HEALTHCHECK")
				if h == nil || !strings.Contains(h.args, "CMD [") {
					t.Errorf("final stage: want an exec-form HEALTHCHECK, got %v", h)
				}
			}
		})
	}
}

var pinnedRe = regexp.MustCompile(`(?m)^\s*Pinned\s*=\s*"([^"]+)"`)
var argClaude = regexp.MustCompile(`(?m)^ARG CLAUDE_CODE_VERSION=(\S+)$`)

// TestAgentImageClaudeVersion: the agent image installs the Claude Code
// release make test runs against.
func TestAgentImageClaudeVersion(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repo, "shared", "claudecli", "versions", "versions.go"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := os.ReadFile(filepath.Join(repo, "deploy", "agent", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, arg := pinnedRe.FindSubmatch(src), argClaude.FindSubmatch(df)
	if pinned == nil || arg == nil {
		t.Fatalf("versions.Pinned (%q) or ARG CLAUDE_CODE_VERSION (%q) not found", pinned, arg)
	}
	if string(pinned[1]) != string(arg[1]) {
		t.Errorf("deploy/agent/Dockerfile installs Claude Code %s, versions.Pinned is %s", arg[1], pinned[1])
	}
}
