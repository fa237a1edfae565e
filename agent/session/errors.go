package session

import (
	"errors"
	"fmt"
)

// Sentinel errors; the gRPC layer maps them to status codes and BetCode
// error codes.
var (
	ErrNotFound     = errors.New("session does not exist")
	ErrClosed       = errors.New("agent is shutting down")
	ErrStale        = errors.New("permission request expired or was already answered")
	ErrSlowConsumer = errors.New("client fell too far behind")
)

// InvalidError is a request the caller must fix.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// SlowConsumerError is returned to a subscriber that was cut off; LastSeq is
// the last sequence it was sent, to resume from.
type SlowConsumerError struct {
	LastSeq uint64
	Buffer  int
}

func (e *SlowConsumerError) Error() string {
	return fmt.Sprintf("client fell more than %d events behind and was disconnected; resume from sequence %d", e.Buffer, e.LastSeq)
}

func (e *SlowConsumerError) Unwrap() error { return ErrSlowConsumer }

// DirectoryError refuses a working directory that does not exist (or is
// not a directory). It wraps the *InvalidError that explains it.
type DirectoryError struct {
	Dir string
	Err error
}

func (e *DirectoryError) Error() string { return e.Err.Error() }

func (e *DirectoryError) Unwrap() error { return e.Err }
