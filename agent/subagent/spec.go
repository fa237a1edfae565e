package subagent

import (
	"context"
	"errors"
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
