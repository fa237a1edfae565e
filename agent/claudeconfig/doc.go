// Package claudeconfig reads Claude Code's own configuration files, the way
// the CLI does, for ConfigService:
//
//   - MCP servers: user scope in ~/.claude.json "mcpServers", local scope
//     (this user, one project) in ~/.claude.json "projects"[<dir>].mcpServers,
//     project scope in <dir>/.mcp.json "mcpServers". A name defined in
//     several scopes is taken from the first of local, project, user.
//     Project servers rejected by "disabledMcpjsonServers" (in any settings
//     file or the project's entry of ~/.claude.json), or switched off with
//     "disabledMcpServers" (~/.claude.json project entry), are DISABLED.
//   - Settings: ~/.claude/settings.json (user), <dir>/.claude/settings.json
//     (project), <dir>/.claude/settings.local.json (local); their
//     "permissions" {allow, deny, ask, defaultMode}, "model" and "env".
//
// It only reads; files that do not exist are empty, and files that do not
// parse are errors naming them.
package claudeconfig
