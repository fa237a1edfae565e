package store

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Answer reports whether err is the store's answer (not found, a conflict,
// a revocation, an invalid argument, a full buffer, a closed store) rather
// than a failure to answer (the database restarting or unreachable).
func Answer(err error) bool {
	for _, a := range []error{ErrNotFound, ErrConflict, ErrRevoked, ErrInvalid, ErrBufferFull, ErrClosed} {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

// RetryPolicy bounds Retry: the first wait, the longest, and how long to
// keep trying.
type RetryPolicy struct {
	First, Max, For time.Duration
}

// Retry runs op until it succeeds or the store answers (Answer), waiting
// p.First, growing to p.Max, between tries, for at most p.For or until ctx
// ends; a database that fails for a moment (a PostgreSQL restart) then
// costs its callers a delay, not a failure. It returns op's last error
// and the number of tries.
func Retry(ctx context.Context, p RetryPolicy, op func() error) (tries int, err error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = p.First, p.Max, p.For
	err = backoff.Retry(func() error {
		tries++
		err := op()
		if err != nil && Answer(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx))
	return tries, err
}
