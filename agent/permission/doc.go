// Package permission is BetCode's permission rule engine: it decides whether
// a tool call of the Claude Code CLI is allowed, denied or needs the user's
// answer. It is pure (no I/O, no clock, no logging) and an Engine is
// immutable, so one engine serves every session concurrently; session grants
// make a new engine with Engine.With.
//
// Rules come in two syntaxes. Claude Code's settings syntax (ParseRule,
// Settings.Rules):
//
//	Bash                        every use of the tool (also Bash(*))
//	Bash(npm run test)          that exact command
//	Bash(npm run test:*)        prefix with a word boundary; same as Bash(npm run test *)
//	Bash(git * main)            '*' anywhere matches any characters
//	Read(**/*.md) Edit(src/**)  gitignore-style paths relative to the cwd
//	Read(//etc/**)              "//" is the filesystem root
//	Read(~/.ssh/**)             "~/" is Options.Home
//	Edit(/docs/**)              a leading "/" is the project (cwd) root
//	WebFetch(domain:x.com)      the URL's host; *.x.com for subdomains
//	mcp__srv, mcp__srv__*       every tool of an MCP server
//	mcp__srv__tool              one MCP tool
//
// and ccgrid's {toolName, pathPattern, behavior} (CCGridRule).
//
// Deny rules win over allow rules, and allow rules over ask rules; when no rule
// matches, Options.Default applies (Ask unless configured). A Bash command is
// split on &&, ||, ;, |, & and newlines outside quotes, and every part is
// decided: a deny on any part denies the call, and the call is allowed only
// when every part is allowed. docs/permissions.md has the full semantics and
// where they differ from Claude Code's.
package permission
