package subagent

import "testing"

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
