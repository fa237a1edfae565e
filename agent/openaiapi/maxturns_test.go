package openaiapi

import "testing"

func TestMaxSteps(t *testing.T) {
	tests := []struct {
		name                    string
		session, provider, want int
	}{
		{"default", 0, 0, defaultMaxSteps},
		{"provider knob", 0, 7, 7},
		{"session max_turns wins", 3, 7, 3},
		{"session max_turns alone", 2, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxSteps(tt.session, tt.provider); got != tt.want {
				t.Fatalf("maxSteps(%d, %d) = %d, want %d", tt.session, tt.provider, got, tt.want)
			}
		})
	}
}
