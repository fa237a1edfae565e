package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// KV is the subset of the event log (eventlog.Log) the service keeps its
// records in.
type KV interface {
	PutKV(ctx context.Context, scope, key string, value []byte) error
	GetKV(ctx context.Context, scope, prefix string) (map[string][]byte, error)
	DeleteKV(ctx context.Context, scope, key string) error
}

// kvScope is the agent-wide scope of the key/value table (no session).
const kvScope = ""

const keyPrefix = "worktree/"

// record is what the agent remembers of a worktree: what git does not keep.
type record struct {
	ID        string    `json:"id"`
	Path      string    `json:"path"`
	Repo      string    `json:"repo"` // main worktree (or bare repository) path
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"` // created by BetCode, or first seen
}

// idFor is the stable id of the worktree at path (absolute, clean, no
// symlinks).
func idFor(path string) string {
	sum := sha256.Sum256([]byte(path))
	return "wt-" + hex.EncodeToString(sum[:8])
}

// canonical makes p absolute, clean and symlink-free (as far as it exists).
func canonical(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// validID reports whether id has the shape idFor gives.
func validID(id string) bool {
	h, ok := strings.CutPrefix(id, "wt-")
	if !ok || len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

type store struct{ kv KV }

func (s store) get(ctx context.Context, id string) (record, bool, error) {
	m, err := s.kv.GetKV(ctx, kvScope, keyPrefix+id)
	if err != nil {
		return record{}, false, fmt.Errorf("read worktree %s: %w", id, err)
	}
	v, ok := m[keyPrefix+id]
	if !ok {
		return record{}, false, nil
	}
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return record{}, false, fmt.Errorf("decode worktree %s: %w", id, err)
	}
	return r, true, nil
}

func (s store) put(ctx context.Context, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode worktree %s: %w", r.ID, err)
	}
	if err := s.kv.PutKV(ctx, kvScope, keyPrefix+r.ID, b); err != nil {
		return fmt.Errorf("save worktree %s: %w", r.ID, err)
	}
	return nil
}

func (s store) delete(ctx context.Context, id string) error {
	if err := s.kv.DeleteKV(ctx, kvScope, keyPrefix+id); err != nil {
		return fmt.Errorf("forget worktree %s: %w", id, err)
	}
	return nil
}
