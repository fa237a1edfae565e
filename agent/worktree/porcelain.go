package worktree

import (
	"fmt"
	"strings"
)

// entry is one worktree as `git worktree list --porcelain -z` reports it.
type entry struct {
	Path       string
	Head       string // commit hash; empty in a repository without commits
	Branch     string // short name; empty when detached or bare
	Bare       bool
	Detached   bool
	Locked     bool
	LockReason string
	Prunable   bool
}

// parseList decodes `git worktree list --porcelain -z`: attributes ended by
// NUL, worktrees separated by an empty attribute. The first worktree is the
// main one. Unknown attributes are ignored (newer gits may add some).
func parseList(out []byte) ([]entry, error) {
	var list []entry
	var cur *entry
	for _, attr := range strings.Split(string(out), "\x00") {
		if attr == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(attr, " ")
		if key == "worktree" {
			if val == "" {
				return nil, fmt.Errorf("git worktree list: empty worktree path")
			}
			list = append(list, entry{Path: val})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("git worktree list: attribute %q before any worktree", key)
		}
		switch key {
		case "HEAD":
			cur.Head = val
		case "branch":
			cur.Branch = strings.TrimPrefix(val, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked, cur.LockReason = true, val
		case "prunable":
			cur.Prunable = true
		}
	}
	return list, nil
}
