package e2ee

import (
	"errors"
	"strings"
	"unicode/utf8"
)

var (
	// ErrIntegrity ends a Conn whose peer's message failed to open: someone
	// between the two ends altered, dropped, replayed or reordered it.
	ErrIntegrity = errors.New("end-to-end channel: message failed authentication (altered, replayed or reordered in transit)")

	// ErrRefused is wrapped by Accept's error when authorize refused the
	// device, and matched by Dial's *RefusedError.
	ErrRefused = errors.New("refused")

	// ErrPairingFailed is wrapped by every PairDevice and PairMachine error
	// that says the other side did not prove the pairing: a wrong, expired or
	// used code, a substituted key, or an exchange altered in transit.
	ErrPairingFailed = errors.New("pairing failed")

	// ErrKeyMismatch is wrapped (with ErrPairingFailed) by PairDevice's error
	// when the machine's key is not the one the pairing code names.
	ErrKeyMismatch = errors.New("the machine's key does not match the pairing code's fingerprint: something between you and the machine substituted it; pairing refused")

	// ErrInvalidPairingCode is wrapped by ParsePairingCode's and
	// PairingCode.Validate's errors.
	ErrInvalidPairingCode = errors.New("invalid pairing code")
)

// RefusedError is Dial's error when the machine authenticated itself and
// refused this device; Reason is the machine's text (at most MaxReason
// bytes), safe to show: the relay cannot forge or alter it.
type RefusedError struct {
	Reason string
}

// Error returns "refused: " and the reason.
func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Is makes errors.Is(err, ErrRefused) hold for a *RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
