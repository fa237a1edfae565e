// Package worktree implements the agent's WorktreeService: git worktrees on
// the daemon's machine, so that several sessions can work on one
// repository side by side, each on its own branch.
//
// Everything is done by the real git binary (`git worktree list|add|remove`,
// run as a process with a timeout, the C locale, no prompts and no
// inherited GIT_* variables); nothing of git is reimplemented.
//
// Worktree ids are derived from paths: "wt-" and the first 16 hex digits of
// the SHA-256 of the worktree's absolute, symlink-free path. The same
// directory always has the same id, across agent restarts and for
// worktrees made outside BetCode. What git does not store — the display
// name and when BetCode first saw or created the worktree — is kept in the
// event log's key/value table (scope "", keys "worktree/<id>"), which is
// also how an id is found again from SwitchWorktree or RemoveWorktree.
//
// A new worktree goes beside its repository unless the request names a
// path: <parent>/<repo>.worktrees/<name> for the repository at
// <parent>/<repo> (a bare repository's ".git" suffix is dropped). Branch
// names are checked with `git check-ref-format --branch`; display names
// the same way and also as a path element (no "..", not absolute, no
// control characters).
package worktree
