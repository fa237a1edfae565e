package eventlog

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestSessionRoundTrip(t *testing.T) {
	l, _ := openTest(t, Options{})
	base := time.Unix(1700000000, 123456789)
	tests := []struct {
		name string
		s    Session
	}{
		{"minimal", Session{ID: "min"}},
		{"full", Session{
			ID: "full", Model: "claude-opus", WorkingDirectory: "/src/x", WorktreeID: "wt1",
			Status: "running", ClaudeStarted: true, CreatedAt: base, UpdatedAt: base.Add(time.Hour),
			MessageCount: 42, TotalInputTokens: 1 << 40, TotalOutputTokens: ^uint64(0),
			TotalCostUSD: 1.25, LastMessagePreview: "hello ✓", CompactionSeq: 99,
			Metadata: map[string]string{"a": "1", "b": "two"},
			Name:     "my session ✓", CreatedBy: "user-1", LastStopReason: "end_turn",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.PutSession(t.Context(), tt.s); err != nil {
				t.Fatal(err)
			}
			got, err := l.GetSession(t.Context(), tt.s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !sessionEqual(got, tt.s) {
				t.Fatalf("GetSession = %+v\nwant %+v", got, tt.s)
			}
		})
	}

	t.Run("upsert", func(t *testing.T) {
		s := tests[1].s
		s.Status, s.MessageCount, s.Metadata = "idle", 43, nil
		if err := l.PutSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		got, err := l.GetSession(t.Context(), s.ID)
		if err != nil || !sessionEqual(got, s) {
			t.Fatalf("GetSession = %+v, %v", got, err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := l.GetSession(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetSession = %v, want ErrNotFound", err)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		if err := l.PutSession(t.Context(), Session{}); err == nil {
			t.Fatal("PutSession with empty id succeeded")
		}
	})
}

func sessionEqual(a, b Session) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) || !a.UpdatedAt.Equal(b.UpdatedAt) || !maps.Equal(a.Metadata, b.Metadata) {
		return false
	}
	a.CreatedAt, a.UpdatedAt, a.Metadata = time.Time{}, time.Time{}, nil
	b.CreatedAt, b.UpdatedAt, b.Metadata = time.Time{}, time.Time{}, nil
	return reflect.DeepEqual(a, b)
}

func TestListSessions(t *testing.T) {
	l, _ := openTest(t, Options{})
	base := time.Unix(1700000000, 0)
	// s0 is the oldest; dirs alternate /a, /b; worktrees cycle w0..w2.
	for i := range 10 {
		s := Session{
			ID:               fmt.Sprintf("s%d", i),
			WorkingDirectory: []string{"/a", "/b"}[i%2],
			WorktreeID:       fmt.Sprintf("w%d", i%3),
			UpdatedAt:        base.Add(time.Duration(i) * time.Minute),
		}
		if err := l.PutSession(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		f         SessionFilter
		wantIDs   []string
		wantTotal int
	}{
		{"all", SessionFilter{}, []string{"s9", "s8", "s7", "s6", "s5", "s4", "s3", "s2", "s1", "s0"}, 10},
		{"limit", SessionFilter{Limit: 3}, []string{"s9", "s8", "s7"}, 10},
		{"limit offset", SessionFilter{Limit: 3, Offset: 3}, []string{"s6", "s5", "s4"}, 10},
		{"offset only", SessionFilter{Offset: 8}, []string{"s1", "s0"}, 10},
		{"offset past end", SessionFilter{Limit: 5, Offset: 20}, nil, 10},
		{"dir", SessionFilter{WorkingDirectory: "/a"}, []string{"s8", "s6", "s4", "s2", "s0"}, 5},
		{"dir limit", SessionFilter{WorkingDirectory: "/b", Limit: 2, Offset: 1}, []string{"s7", "s5"}, 5},
		{"worktree", SessionFilter{WorktreeID: "w0"}, []string{"s9", "s6", "s3", "s0"}, 4},
		{"dir and worktree", SessionFilter{WorkingDirectory: "/a", WorktreeID: "w0"}, []string{"s6", "s0"}, 2},
		{"no match", SessionFilter{WorkingDirectory: "/c"}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total, err := l.ListSessions(t.Context(), tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, tt.wantIDs) || total != tt.wantTotal {
				t.Fatalf("ListSessions = %v, total %d; want %v, total %d", ids, total, tt.wantIDs, tt.wantTotal)
			}
		})
	}
}

func TestKV(t *testing.T) {
	l, _ := openTest(t, Options{})
	put := []struct {
		session, key string
		value        []byte
	}{
		{"s", "perm/Bash", []byte("allow")},
		{"s", "perm/Edit", []byte("deny")},
		{"s", "perm/Bash", []byte("ask")}, // overwrite
		{"s", "permx", []byte("x")},
		{"s", "other", nil},
		{"s", "perm\xff", []byte("high byte")},
		{"t", "perm/Bash", []byte("t's")},
	}
	for _, p := range put {
		if err := l.PutKV(t.Context(), p.session, p.key, p.value); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, session, prefix string
		want                  map[string]string
	}{
		{"prefix", "s", "perm/", map[string]string{"perm/Bash": "ask", "perm/Edit": "deny"}},
		{"shorter prefix", "s", "perm", map[string]string{"perm/Bash": "ask", "perm/Edit": "deny", "permx": "x", "perm\xff": "high byte"}},
		{"all", "s", "", map[string]string{"perm/Bash": "ask", "perm/Edit": "deny", "permx": "x", "other": "", "perm\xff": "high byte"}},
		{"exact key", "s", "perm/Edit", map[string]string{"perm/Edit": "deny"}},
		{"other session", "t", "", map[string]string{"perm/Bash": "t's"}},
		{"none", "s", "zzz", map[string]string{}},
		{"unknown session", "u", "", map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.GetKV(t.Context(), tt.session, tt.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("GetKV returned a nil map")
			}
			gotS := map[string]string{}
			for k, v := range got {
				gotS[k] = string(v)
			}
			if !maps.Equal(gotS, tt.want) {
				t.Fatalf("GetKV = %q, want %q", gotS, tt.want)
			}
		})
	}
}
