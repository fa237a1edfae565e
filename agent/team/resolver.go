package team

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/betcode-dev/betcode/agent/subagent"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var _ subagent.SpecResolver = (*Store)(nil)

// Teammate returns the template SubagentSpec.teammate_spec_id gives a
// subagent: the spec's name and model, and a preamble made of its role,
// instructions and skills (see Preamble). An unknown id gives an error
// wrapping subagent.ErrSpecNotFound.
func (s *Store) Teammate(_ context.Context, id string) (subagent.TeammateTemplate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.teammateIndex(id)
	if i < 0 {
		return subagent.TeammateTemplate{}, fmt.Errorf("teammate spec %q: %w", id, errors.Join(ErrSpecNotFound, subagent.ErrSpecNotFound))
	}
	t := s.teammates[i]
	var skills []*pb.SkillSpec
	for _, sid := range t.GetSkillIds() {
		if j := s.skillIndex(sid); j >= 0 {
			skills = append(skills, s.skills[j])
		}
	}
	return subagent.TeammateTemplate{Name: t.GetName(), Model: t.GetModel(), Preamble: Preamble(t, skills)}, nil
}

// Preamble is the text a subagent made from teammate spec t is given
// before its prompt: who it is, its role and instructions, then each skill
// with its description, the tools it may use, its argument hint and its
// SKILL.md content.
func Preamble(t *pb.TeammateSpec, skills []*pb.SkillSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are the teammate %q.\n", t.GetName())
	if r := strings.TrimSpace(t.GetRole()); r != "" {
		fmt.Fprintf(&b, "Role: %s\n", r)
	}
	if in := strings.TrimSpace(t.GetInstructions()); in != "" {
		fmt.Fprintf(&b, "\nInstructions:\n%s\n", in)
	}
	for _, k := range skills {
		fmt.Fprintf(&b, "\nSkill %q (%s", k.GetName(), skillTypeName(k.GetSkillType()))
		if p := k.GetPluginName(); p != "" {
			fmt.Fprintf(&b, ", plugin %s", p)
		}
		b.WriteString(")")
		if d := strings.TrimSpace(k.GetDescription()); d != "" {
			fmt.Fprintf(&b, ": %s", d)
		}
		b.WriteString("\n")
		if a := k.GetAllowedTools(); a != "" {
			fmt.Fprintf(&b, "Allowed tools: %s\n", a)
		}
		if a := k.GetArgumentHint(); a != "" {
			fmt.Fprintf(&b, "Arguments: %s\n", a)
		}
		if c := strings.TrimSpace(k.GetSkillMdContent()); c != "" {
			fmt.Fprintf(&b, "<skill name=%q>\n%s\n</skill>\n", k.GetName(), c)
		}
	}
	return b.String()
}
