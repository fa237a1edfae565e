package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Retry tries again while the store fails, stops at its answers and at
// success, and gives up after its bound.
func TestRetry(t *testing.T) {
	down := errors.New("FATAL: the database system is shutting down (SQLSTATE 57P03)")
	p := RetryPolicy{First: time.Millisecond, Max: 2 * time.Millisecond, For: 5 * time.Second}
	for _, tc := range []struct {
		name      string
		errs      []error // op's results in turn; then nil
		tries     int
		wantErr   error
		shortWait bool
	}{
		{"fails twice, then answers", []error{down, down}, 3, nil, false},
		{"not found is an answer", []error{fmt.Errorf("machine m1: %w", ErrNotFound)}, 1, ErrNotFound, false},
		{"a conflict is an answer", []error{down, ErrConflict}, 2, ErrConflict, false},
		{"down for good", nil, 0, down, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := p
			if tc.shortWait {
				p.For = 20 * time.Millisecond
			}
			n := 0
			tries, err := Retry(context.Background(), p, func() error {
				n++
				if tc.shortWait {
					return down
				}
				if n <= len(tc.errs) {
					return tc.errs[n-1]
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || err == nil != (tc.wantErr == nil) {
				t.Fatalf("Retry = %v, want %v", err, tc.wantErr)
			}
			if tc.tries > 0 && tries != tc.tries {
				t.Errorf("%d tries, want %d", tries, tc.tries)
			}
			if tries != n {
				t.Errorf("Retry counted %d tries, op ran %d times", tries, n)
			}
		})
	}
}
