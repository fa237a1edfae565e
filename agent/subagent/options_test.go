package subagent

import (
	"slices"
	"testing"
	"time"
)

func TestOptionsMaxParallel(t *testing.T) {
	tests := []struct {
		name    string
		in, out int
	}{
		{"default", 0, 4},
		{"the benchmark's 10", 10, 10},
		{"the limit", MaxParallelLimit, MaxParallelLimit},
		{"capped", 40, MaxParallelLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{MaxParallel: tt.in}
			o.setDefaults(nil)
			if o.MaxParallel != tt.out {
				t.Fatalf("MaxParallel %d -> %d, want %d", tt.in, o.MaxParallel, tt.out)
			}
		})
	}
}

func TestInsertOrdered(t *testing.T) {
	type rec struct {
		at int64
		id string
	}
	key := func(r rec) (time.Time, string) { return time.Unix(r.at, 0), r.id }
	var list []rec
	for _, r := range []rec{{2, "b"}, {1, "z"}, {3, "a"}, {2, "a"}, {3, "b"}} {
		list = insertOrdered(list, r, key)
	}
	want := []rec{{1, "z"}, {2, "a"}, {2, "b"}, {3, "a"}, {3, "b"}}
	if !slices.Equal(list, want) {
		t.Fatalf("%v, want %v", list, want)
	}
}
