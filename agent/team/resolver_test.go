package team

import (
	"errors"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/agent/subagent"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestResolver(t *testing.T) {
	s, _ := newStore(t)
	lint := mustSkill(t, s, &pb.SkillSpec{Name: "custom-linter", Description: "Run custom linting rules", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL,
		SkillMdContent: "# Custom Linter\n\nRun eslint.", AllowedTools: "Bash", ArgumentHint: "path:string"})
	web := mustSkill(t, s, &pb.SkillSpec{Name: "web-search", Description: "Search the web", SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL})
	full := mustTeammate(t, s, &pb.TeammateSpec{Name: "auditor", Role: "Security specialist", Instructions: "Focus on OWASP.",
		SkillIds: []string{lint.GetId(), web.GetId()}, Model: "claude-opus-4"})
	bare := mustTeammate(t, s, &pb.TeammateSpec{Name: "helper"})

	tests := []struct {
		name      string
		id        string
		wantName  string
		wantModel string
		contains  []string // in this order
		absent    []string
	}{
		{name: "role, instructions and skills", id: full.GetId(), wantName: "auditor", wantModel: "claude-opus-4", contains: []string{
			`You are the teammate "auditor".`, "Role: Security specialist", "Instructions:\nFocus on OWASP.",
			`Skill "custom-linter" (internal): Run custom linting rules`, "Allowed tools: Bash", "Arguments: path:string",
			"<skill name=\"custom-linter\">\n# Custom Linter\n\nRun eslint.\n</skill>",
			`Skill "web-search" (official): Search the web`,
		}},
		{name: "name only", id: bare.GetId(), wantName: "helper", contains: []string{`You are the teammate "helper".`},
			absent: []string{"Role:", "Instructions:", "Skill "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := s.Teammate(t.Context(), tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if tpl.Name != tt.wantName || tpl.Model != tt.wantModel {
				t.Fatalf("template %+v", tpl)
			}
			rest := tpl.Preamble
			for _, c := range tt.contains {
				i := strings.Index(rest, c)
				if i < 0 {
					t.Fatalf("preamble lacks %q (in order):\n%s", c, tpl.Preamble)
				}
				rest = rest[i+len(c):]
			}
			for _, a := range tt.absent {
				if strings.Contains(tpl.Preamble, a) {
					t.Fatalf("preamble has %q:\n%s", a, tpl.Preamble)
				}
			}
		})
	}
	if _, err := s.Teammate(t.Context(), "nope"); !errors.Is(err, subagent.ErrSpecNotFound) || !errors.Is(err, ErrSpecNotFound) {
		t.Fatalf("unknown spec: %v", err)
	}
}
