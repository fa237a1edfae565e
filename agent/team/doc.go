// Package team serves TeamService (proto/betcode/v1/team.proto): the ccgrid
// view of a session's parallel work — its teammates, its task list, and the
// teammate and skill specs a user saves to reuse (docs/teams.md).
//
// One model, two views: the service keeps no copy of what it shows. On
// every call it reads what the agent already keeps:
//
//   - A session's teammates are its subagents, as SubagentService lists
//     them (none when the subagent_orchestration flag is off and the
//     service answers UNIMPLEMENTED), and the subagents Claude Code's own
//     Agent tool ("Task" before Claude Code 2.1) started inside the
//     session, folded from the session's event log (tasktool.go): a
//     ToolCallStart of that tool is a teammate whose subagent's events
//     carry the call's id in parent_tool_use_id, working until the
//     SubagentTaskUpdate that ends its subagent (or a foreground call's
//     ToolCallResult, or the end of the session's Claude Code process).
//     Logs from before that event existed fall back to a guess for a
//     background call: ended with its last message.
//   - A session's tasks are the steps of its orchestrations
//     (SubagentService.ListOrchestrations), then the items of the session's
//     latest own TodoUpdate (tasks.go).
//
// Teammate and skill specs are the only state the package owns: Store keeps
// them in one JSON file in the agent's data directory, and implements
// subagent.SpecResolver so that SubagentSpec.teammate_spec_id gives a
// subagent a spec's role, instructions and skills.
package team
