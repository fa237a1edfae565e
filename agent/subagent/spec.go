package subagent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TeammateTemplate is what a saved teammate spec (TeamService's
// TeammateSpec) gives a subagent whose SubagentSpec names it with
// teammate_spec_id.
type TeammateTemplate struct {
	// Name is the spec's name; the subagent's when its SubagentSpec has none.
	Name string
	// Model applies when the SubagentSpec has no model ("" = the parent's).
	Model string
	// Preamble is the spec's role, instructions and skills as text; it is
	// put before the subagent's prompt.
	Preamble string
}

// SpecResolver resolves SubagentSpec.teammate_spec_id. It is the subset of
// the team store the service needs (package agent/team implements it; the
// daemon plugs it in as Options.Specs).
type SpecResolver interface {
	// Teammate returns the template of the teammate spec id; an unknown
	// id gives an error wrapping ErrSpecNotFound.
	Teammate(ctx context.Context, id string) (TeammateTemplate, error)
}

// ErrSpecNotFound is the error a SpecResolver wraps for an unknown
// teammate spec id; the service answers NOT_FOUND / SPEC_NOT_FOUND.
var ErrSpecNotFound = errors.New("teammate spec not found")

// resolveSpec applies the teammate spec that spec names, if any, and
// returns the spec to run: a copy with the template's preamble before the
// prompt, its model when spec has none and its name when spec has none.
// Unknown id: NOT_FOUND / SPEC_NOT_FOUND; no resolver: FAILED_PRECONDITION.
func (s *Service) resolveSpec(ctx context.Context, spec *pb.SubagentSpec, what string) (*pb.SubagentSpec, error) {
	id := spec.GetTeammateSpecId()
	if id == "" {
		return spec, nil
	}
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	if s.opt.Specs == nil {
		return nil, fail(codes.FailedPrecondition, CodeSpecsUnavailable, "%steammate_spec_id %q: this agent has no teammate specs (TeamService is not available)", prefix, id)
	}
	tmpl, err := s.opt.Specs.Teammate(ctx, id)
	switch {
	case errors.Is(err, ErrSpecNotFound):
		return nil, fail(codes.NotFound, CodeSpecNotFound, "%steammate spec %q does not exist", prefix, id)
	case err != nil:
		return nil, sessionStatus(fmt.Errorf("resolve teammate spec %q: %w", id, err), strings.TrimSuffix(prefix, ": ")+"teammate spec")
	}
	out := proto.CloneOf(spec)
	if p := strings.TrimSpace(tmpl.Preamble); p != "" {
		out.Prompt = p + "\n\n" + spec.GetPrompt()
	}
	if out.Model == "" {
		out.Model = tmpl.Model
	}
	if out.Name == "" {
		out.Name = tmpl.Name
	}
	return out, nil
}
