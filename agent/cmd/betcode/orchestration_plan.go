package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/subagent"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// A plan file describes an orchestration for `betcode orchestration create
// -f`: YAML, or JSON when the file name ends in .json, with the keys below
// (docs/subagents.md, "CLI"; testdata/plan.yaml is an example). It is
// checked here before anything is sent, so that a mistake is reported
// with the file's name and line: an unknown key, a step without id or
// prompt, a repeated id, a dependency on an unknown step, a cycle.

// plan is a parsed plan file.
type plan struct {
	Name          string     `yaml:"name" json:"name"`
	MaxParallel   uint32     `yaml:"max_parallel" json:"max_parallel"`
	FailurePolicy string     `yaml:"failure_policy" json:"failure_policy"`
	Steps         []planStep `yaml:"steps" json:"steps"`

	// file names the plan in errors; lines are the steps' lines (YAML).
	file  string
	lines []int
}

// planStep is one step of a plan file.
type planStep struct {
	ID                       string            `yaml:"id" json:"id"`
	Name                     string            `yaml:"name" json:"name"`
	Prompt                   string            `yaml:"prompt" json:"prompt"`
	Model                    string            `yaml:"model" json:"model"`
	DependsOn                []string          `yaml:"depends_on" json:"depends_on"`
	IncludeDependencyResults bool              `yaml:"include_dependency_results" json:"include_dependency_results"`
	MaxAttempts              uint32            `yaml:"max_attempts" json:"max_attempts"`
	Cwd                      string            `yaml:"cwd" json:"cwd"`
	Worktree                 string            `yaml:"worktree" json:"worktree"`
	CreateWorktree           bool              `yaml:"create_worktree" json:"create_worktree"`
	AllowTools               []string          `yaml:"allow_tools" json:"allow_tools"`
	AutoApprove              bool              `yaml:"auto_approve" json:"auto_approve"`
	MaxTurns                 uint32            `yaml:"max_turns" json:"max_turns"`
	TeammateSpec             string            `yaml:"teammate_spec" json:"teammate_spec"`
	Provider                 string            `yaml:"provider" json:"provider"`
	ProviderConfig           map[string]string `yaml:"provider_config" json:"provider_config"`
	Metadata                 map[string]string `yaml:"metadata" json:"metadata"`
}

var (
	planKeys = []string{"name", "max_parallel", "failure_policy", "steps"}
	stepKeys = []string{"id", "name", "prompt", "model", "depends_on", "include_dependency_results", "max_attempts",
		"cwd", "worktree", "create_worktree", "allow_tools", "auto_approve", "max_turns", "teammate_spec",
		"provider", "provider_config", "metadata"}
)

// errPlan marks a plan file's mistakes (exit 5).
var errPlan = errors.New("invalid plan")

// planError is a mistake in a plan file, at a line when known (> 0).
type planError struct {
	file string
	line int
	msg  string
}

func (e *planError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return e.file + ": " + e.msg
}

func (e *planError) Is(target error) bool { return target == errPlan }

// parsePlan reads and checks a plan; name is the file's name (for errors,
// and .json selects JSON).
func parsePlan(name string, r io.Reader) (*plan, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", name, err)
	}
	p := &plan{file: name}
	if strings.EqualFold(filepath.Ext(name), ".json") {
		err = p.decodeJSON(data)
	} else {
		err = p.decodeYAML(data)
	}
	if err != nil {
		return nil, err
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *plan) fail(line int, format string, args ...any) error {
	return &planError{file: p.file, line: line, msg: fmt.Sprintf(format, args...)}
}

// stepLine is the line of step i, 0 when unknown.
func (p *plan) stepLine(i int) int {
	if i < len(p.lines) {
		return p.lines[i]
	}
	return 0
}

func (p *plan) decodeYAML(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlLine(strings.TrimPrefix(err.Error(), "yaml: "))
		return p.fail(line, "not valid YAML: %s", msg)
	}
	if len(doc.Content) == 0 {
		return p.fail(0, "the plan is empty: want name and steps (docs/subagents.md)")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return p.fail(root.Line, "want a mapping with name and steps, not %s", nodeKind(root))
	}
	if err := p.checkKeys(root, planKeys, "plan"); err != nil {
		return err
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "steps" {
			continue
		}
		steps := root.Content[i+1]
		if steps.Kind != yaml.SequenceNode {
			return p.fail(steps.Line, "steps: want a list of steps, not %s", nodeKind(steps))
		}
		for n, s := range steps.Content {
			if s.Kind != yaml.MappingNode {
				return p.fail(s.Line, "step %d: want a mapping (id, prompt, ...), not %s", n+1, nodeKind(s))
			}
			if err := p.checkKeys(s, stepKeys, stepName(s, n+1)); err != nil {
				return err
			}
			p.lines = append(p.lines, s.Line)
		}
	}
	if err := root.Decode(p); err != nil {
		line, msg := yamlLine(strings.TrimSpace(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")))
		return p.fail(line, "%s", msg)
	}
	return nil
}

// yamlLine splits yaml's "line N: message" into N and the message.
func yamlLine(msg string) (int, string) {
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, m[2]
	}
	return 0, msg
}

var yamlLineRE = regexp.MustCompile(`^line ([0-9]+): (.*)$`)

// checkKeys refuses a key of m that is not in known, suggesting the
// closest known one.
func (p *plan) checkKeys(m *yaml.Node, known []string, where string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if slices.Contains(known, k.Value) {
			continue
		}
		if near := closest(k.Value, known); near != "" {
			return p.fail(k.Line, "%s: unknown key %q; did you mean %q?", where, k.Value, near)
		}
		return p.fail(k.Line, "%s: unknown key %q (known: %s)", where, k.Value, strings.Join(known, ", "))
	}
	return nil
}

// stepName is `step "ID"` for a step mapping with an id, else "step N".
func stepName(m *yaml.Node, n int) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "id" && m.Content[i+1].Kind == yaml.ScalarNode && m.Content[i+1].Value != "" {
			return fmt.Sprintf("step %q", m.Content[i+1].Value)
		}
	}
	return fmt.Sprintf("step %d", n)
}

// closest is the word of words within two edits of w, "" if none.
func closest(w string, words []string) string {
	best, bestD := "", 3
	for _, c := range words {
		if d := editDistance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "that"
}

func (p *plan) decodeJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return p.fail(lineAt(data, syn.Offset), "not valid JSON: %s", syn.Error())
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return p.fail(lineAt(data, typ.Offset), "%s: want %s, not a JSON %s", typ.Field, typ.Type, typ.Value)
		}
		if errors.Is(err, io.EOF) {
			return p.fail(0, "the plan is empty: want name and steps (docs/subagents.md)")
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field, _ = strconv.Unquote(field)
			if near := closest(field, append(slices.Clone(planKeys), stepKeys...)); near != "" {
				return p.fail(0, "unknown key %q; did you mean %q?", field, near)
			}
			return p.fail(0, "unknown key %q (plan keys: %s; step keys: %s)", field, strings.Join(planKeys, ", "), strings.Join(stepKeys, ", "))
		}
		return p.fail(0, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return p.fail(0, "more than one JSON value")
	}
	return nil
}

// lineAt is the 1-based line of byte offset off of data.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// check finds what the agent would refuse, and a few things it would
// take but the user surely did not mean.
func (p *plan) check() error {
	if len(p.Steps) == 0 {
		return p.fail(0, "no steps")
	}
	if _, err := p.policy(); err != nil {
		return err
	}
	first := map[string]int{}
	for i, s := range p.Steps {
		line := p.stepLine(i)
		switch {
		case s.ID == "":
			return p.fail(line, "step %d has no id", i+1)
		case strings.TrimSpace(s.Prompt) == "":
			return p.fail(line, "step %q has no prompt", s.ID)
		case s.MaxAttempts > subagent.MaxAttemptsLimit:
			return p.fail(line, "step %q: max_attempts %d: at most %d", s.ID, s.MaxAttempts, subagent.MaxAttemptsLimit)
		case s.AutoApprove && len(s.AllowTools) == 0:
			return p.fail(line, "step %q: auto_approve needs allow_tools (it approves those and denies every other tool)", s.ID)
		case countSet(s.Cwd != "", s.Worktree != "", s.CreateWorktree) > 1:
			return p.fail(line, "step %q: give at most one of cwd, worktree and create_worktree", s.ID)
		}
		if j, dup := first[s.ID]; dup {
			if l := p.stepLine(j); l > 0 {
				return p.fail(line, "step id %q is used twice (first at line %d)", s.ID, l)
			}
			return p.fail(line, "step id %q is used twice (steps %d and %d)", s.ID, j+1, i+1)
		}
		first[s.ID] = i
		kind, err := provider.Parse(s.Provider)
		if err != nil {
			return p.fail(line, "step %q: provider: %v", s.ID, err)
		}
		if len(s.ProviderConfig) > 0 && kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
			return p.fail(line, "step %q: provider_config needs provider", s.ID)
		}
	}
	for i, s := range p.Steps {
		for _, d := range s.DependsOn {
			if _, ok := first[d]; !ok {
				return p.fail(p.stepLine(i), "step %q depends on unknown step %q", s.ID, d)
			}
		}
	}
	if cycle := p.cycle(); cycle != nil {
		return p.fail(p.stepLine(first[cycle[0]]), "dependency cycle: %s", strings.Join(cycle, " -> "))
	}
	return nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// cycle returns the first dependency cycle found, in step order, as the
// path "a", "b", "a" (a depends on b, b on a); nil when there is none.
func (p *plan) cycle() []string {
	ids := make([]string, len(p.Steps))
	deps := make(map[string][]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[i], deps[s.ID] = s.ID, s.DependsOn
	}
	return subagent.DependencyCycle(ids, deps)
}

// policy is the plan's failure_policy: "fail-fast" (the default) or
// "continue".
func (p *plan) policy() (pb.FailurePolicy, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(p.FailurePolicy)), "_", "-") {
	case "":
		return pb.FailurePolicy_FAILURE_POLICY_UNSPECIFIED, nil
	case "fail-fast":
		return pb.FailurePolicy_FAILURE_POLICY_FAIL_FAST, nil
	case "continue":
		return pb.FailurePolicy_FAILURE_POLICY_CONTINUE, nil
	}
	return 0, p.fail(0, "failure_policy %q: want fail-fast or continue", p.FailurePolicy)
}

// request is the CreateOrchestrationRequest of the plan. dir resolves the
// steps' cwd (relative ones are relative to the plan file).
func (p *plan) request(parent string, dir func(string) (string, error)) (*pb.CreateOrchestrationRequest, error) {
	policy, err := p.policy()
	if err != nil {
		return nil, err
	}
	req := &pb.CreateOrchestrationRequest{ParentSessionId: parent, Name: p.Name, MaxParallel: p.MaxParallel, FailurePolicy: policy}
	for i, s := range p.Steps {
		kind, _ := provider.Parse(s.Provider) // checked by check
		spec := &pb.SubagentSpec{
			Name: s.Name, Prompt: s.Prompt, Model: s.Model, WorktreeId: s.Worktree, CreateWorktree: s.CreateWorktree,
			AllowedTools: s.AllowTools, AutoApprove: s.AutoApprove, MaxTurns: s.MaxTurns, Metadata: s.Metadata,
			TeammateSpecId: s.TeammateSpec, Provider: kind, ProviderConfig: s.ProviderConfig,
		}
		if spec.Name == "" {
			spec.Name = s.ID
		}
		if s.Cwd != "" {
			if spec.WorkingDirectory, err = dir(s.Cwd); err != nil {
				return nil, p.fail(p.stepLine(i), "step %q: cwd: %v", s.ID, err)
			}
		}
		req.Steps = append(req.Steps, &pb.OrchestrationStep{Id: s.ID, Spec: spec, DependsOn: s.DependsOn,
			IncludeDependencyResults: s.IncludeDependencyResults, MaxAttempts: s.MaxAttempts})
	}
	return req, nil
}
