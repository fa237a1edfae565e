// Package procgroup starts children in a process group of their own and
// signals the whole group, so a CLI's own children (shells, MCP servers,
// git hooks) end with it. On Windows, which has no process groups of this
// kind, the child gets a new console process group and "signalling" it
// kills the child.
package procgroup
