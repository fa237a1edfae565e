// Package workspace implements the agent's WorkspaceService: the directory
// picker of a new session (ListDirectories, ValidateDirectory) and the
// read-only changes view of a session's working directory (GetChanges,
// GetFileDiff).
//
// Nothing here writes. The changes come from the real git binary, run with
// a 10 s timeout per command, GIT_OPTIONAL_LOCKS=0 (a view must not take
// index.lock from the user's own git), LC_ALL=C, no pager, colour, external
// diff or textconv driver, and unquoted paths; inherited GIT_* variables
// are dropped so that they cannot point git at another repository.
//
// Paths that clients send back (GetFileDiff) are relative to the work
// tree's top and are refused when they climb out of it, directly or
// through a symlink. Answers are capped: MaxDirectories subdirectories,
// MaxChanges files, MaxDiffBytes of diff, each with a truncated flag.
package workspace
