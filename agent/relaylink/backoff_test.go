package relaylink

import (
	"testing"
	"time"
)

// TestStepBackOffSpread checks each step's wait stays within [d/2, 3d/2]
// and spreads across most of that second-wide window, so that agents cut
// off by the same relay restart do not all dial again in the same instant.
func TestStepBackOffSpread(t *testing.T) {
	const draws = 2000
	tests := []struct {
		step int
		d    time.Duration
	}{
		{0, time.Second}, {1, 2 * time.Second}, {2, 5 * time.Second}, {3, 10 * time.Second},
		{4, 30 * time.Second}, {9, 30 * time.Second}, // stays at the last step
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for range draws {
				b := &stepBackOff{i: tt.step}
				w := b.NextBackOff()
				if w < tt.d/2 || w > tt.d*3/2 {
					t.Fatalf("step %d: wait %s outside [%s, %s]", tt.step, w, tt.d/2, tt.d*3/2)
				}
				lo, hi = min(lo, w), max(hi, w)
			}
			if spread := hi - lo; spread < tt.d*9/10 {
				t.Errorf("step %d: %d waits spread over %s, want at least %s", tt.step, draws, spread, tt.d*9/10)
			}
		})
	}
	b := &stepBackOff{i: 3}
	b.Reset()
	if w := b.NextBackOff(); w > 1500*time.Millisecond {
		t.Errorf("after Reset the wait is %s, want the first step's (at most 1.5s)", w)
	}
}
