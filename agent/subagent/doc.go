// Package subagent serves SubagentService (proto/betcode/v1/subagent.proto):
// subagents spawned on behalf of a parent session, and orchestrations that
// run a plan of steps with dependencies (a DAG) across subagents.
//
// It is a view over session.Manager, like package sessionsvc: a subagent is
// an ordinary session created through the manager, so that its events are
// sequenced, logged and replayable with AgentService.ResumeSession like any
// session's. Its parent, orchestration, step, attempt and final status are
// recorded in the session's metadata under "betcode.subagent.".
//
// A subagent runs with its spec's provider (provider_config) or, unset,
// its parent's provider and configuration; with a max_turns the provider
// bounds each turn (claude-code and openai-api only; a turn stopped by it
// fails the subagent); with create_worktree it runs in a new git worktree
// on a branch "subagent/<name>-<id>", made by the Worktrees seam
// (WorktreeService) beside the repository and kept after it ended; with a
// teammate_spec_id, the SpecResolver's preamble precedes its prompt.
//
// An orchestration's steps start when all their dependencies completed, at
// most max_parallel at once (Options.MaxParallel, the daemon's
// subagent-max-parallel, caps it; dag.go holds the pure scheduling rules,
// orchestration.go the run loop). A failed attempt of a step with
// max_attempts > 1 goes back to PENDING and runs again as a new subagent;
// only its last attempt counts for the failure policy. A step that did not
// complete skips its dependents; with FAIL_FAST it also cancels the other
// unfinished steps. Once the summed cost_usd of every attempt's
// UsageReports exceeds Options.MaxCostUSD, no further step or attempt
// starts and the running ones are cancelled.
//
// Subagents and orchestrations are stored (store.go, persist.go) in the
// event log's key/value table as protobuf records, rewritten on every
// change, so that an agent restart keeps them. What the agent's shutdown
// ends is not rewritten: the next agent finds it still running and
// reports it FAILED, "interrupted by an agent restart", with its
// orchestration. This is an ALPHA service, behind the
// subagent_orchestration feature flag. See docs/subagents.md.
package subagent
