// Package subagent serves SubagentService (proto/betcode/v1/subagent.proto):
// subagents spawned on behalf of a parent session, and orchestrations that
// run a plan of steps with dependencies (a DAG) across subagents.
//
// It is a view over session.Manager, like package sessionsvc: a subagent is
// an ordinary session created through the manager, so that its events are
// sequenced, logged and replayable with AgentService.ResumeSession like any
// session's. Its parent, orchestration, step and final status are recorded
// in the session's metadata under "betcode.subagent.".
//
// Subagents and orchestrations themselves (their status, step states,
// results) are kept in memory only: this is an ALPHA service, behind the
// subagent_orchestration feature flag, and an agent restart forgets them
// (their sessions and events stay). See docs/subagents.md.
//
// An orchestration's steps start when all their dependencies completed, at
// most max_parallel at once (dag.go holds the pure scheduling rules,
// orchestration.go the run loop). A step that did not complete skips its
// dependents; with FAIL_FAST it also cancels the other unfinished steps.
// Once the summed cost_usd of the steps' UsageReports exceeds
// Options.MaxCostUSD, no further step starts and the running ones are
// cancelled. The proto has no retry count, so a failed step is not retried.
package subagent
