package limits

import (
	"fmt"
	"math"
	"time"
)

// Defaults for zero Config fields.
const (
	DefaultCallsPerSecond      = 50
	DefaultBurst               = 200
	DefaultMaxMessageBytes     = 16 << 20
	DefaultMaxStreamsPerToken  = 64
	DefaultMaxStreamsPerTunnel = 512
	DefaultMaxPendingConns     = 256
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultMaxTrackedTokens    = 1 << 16
)

// Config holds the relay's resource limits. Zero fields take the Default*
// values; negative ones are invalid.
type Config struct {
	// CallsPerSecond is the sustained rate of calls one token may start
	// (a token bucket refilled at this rate). Streams count once, when
	// they start.
	CallsPerSecond float64
	// Burst is the token bucket's size: how many calls a token that was
	// quiet may start at once.
	Burst int
	// MaxMessageBytes bounds one request message as its gRPC frame header
	// announces it (compressed size, without the 5-byte header). A call
	// sending a larger one fails with RESOURCE_EXHAUSTED, as grpc-go
	// answers a message over its receive limit.
	MaxMessageBytes int
	// MaxStreamsPerToken bounds the calls one token has open at once.
	MaxStreamsPerToken int
	// MaxStreamsPerTunnel bounds the calls open at once to one machine,
	// whoever makes them.
	MaxStreamsPerTunnel int
	// MaxPendingConns bounds the connections that have not finished TLS
	// (and, for clients, authentication): beyond it a new connection is
	// closed at once, so a flood of half-open connections costs neither
	// goroutines nor handshake memory.
	MaxPendingConns int
	// HandshakeTimeout is how long a connection may take to finish its TLS
	// handshake before it is closed.
	HandshakeTimeout time.Duration
	// MaxTrackedTokens bounds the rate limiter's per-token table. Tokens
	// whose bucket has refilled are forgotten first (which changes
	// nothing: a new bucket starts full); past the bound the least
	// recently seen are, so memory stays bounded under a flood of
	// distinct token ids.
	MaxTrackedTokens int
}

// DefaultConfig returns the default limits.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.CallsPerSecond == 0 {
		c.CallsPerSecond = DefaultCallsPerSecond
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxStreamsPerToken == 0 {
		c.MaxStreamsPerToken = DefaultMaxStreamsPerToken
	}
	if c.MaxStreamsPerTunnel == 0 {
		c.MaxStreamsPerTunnel = DefaultMaxStreamsPerTunnel
	}
	if c.MaxPendingConns == 0 {
		c.MaxPendingConns = DefaultMaxPendingConns
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxTrackedTokens == 0 {
		c.MaxTrackedTokens = DefaultMaxTrackedTokens
	}
	return c
}

// Validate reports the first invalid field by name. Zero fields are valid
// (they take the defaults).
func (c Config) Validate() error {
	switch {
	case c.CallsPerSecond < 0 || math.IsNaN(c.CallsPerSecond) || math.IsInf(c.CallsPerSecond, 0):
		return fmt.Errorf("limits: CallsPerSecond is %v; want a positive number (0: default %d)", c.CallsPerSecond, DefaultCallsPerSecond)
	case c.Burst < 0:
		return fmt.Errorf("limits: Burst is %d; want > 0 (0: default %d)", c.Burst, DefaultBurst)
	case c.MaxMessageBytes < 0 || int64(c.MaxMessageBytes) > math.MaxUint32:
		return fmt.Errorf("limits: MaxMessageBytes is %d; want 1 to %d, the largest a gRPC frame header can announce (0: default %d)", c.MaxMessageBytes, uint32(math.MaxUint32), DefaultMaxMessageBytes)
	case c.MaxStreamsPerToken < 0:
		return fmt.Errorf("limits: MaxStreamsPerToken is %d; want > 0 (0: default %d)", c.MaxStreamsPerToken, DefaultMaxStreamsPerToken)
	case c.MaxStreamsPerTunnel < 0:
		return fmt.Errorf("limits: MaxStreamsPerTunnel is %d; want > 0 (0: default %d)", c.MaxStreamsPerTunnel, DefaultMaxStreamsPerTunnel)
	case c.MaxPendingConns < 0:
		return fmt.Errorf("limits: MaxPendingConns is %d; want > 0 (0: default %d)", c.MaxPendingConns, DefaultMaxPendingConns)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("limits: HandshakeTimeout is %v; want > 0 (0: default %v)", c.HandshakeTimeout, DefaultHandshakeTimeout)
	case c.MaxTrackedTokens < 0:
		return fmt.Errorf("limits: MaxTrackedTokens is %d; want > 0 (0: default %d)", c.MaxTrackedTokens, DefaultMaxTrackedTokens)
	}
	return nil
}
