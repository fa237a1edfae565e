package pairing

import "time"

// Hello is what a device says of itself in a handshake (JSON): it travels
// encrypted, but in the handshake's first message, which is not forward
// secret, so it holds nothing more.
type Hello struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	// Protocol is what the channel carries: "" (HTTP/2 for the agent's
	// gRPC server, the CLI) or ProtocolWeb (docs/e2ee-wire.md §2).
	Protocol string `json:"protocol,omitempty"`
}

// ProtocolWeb is Hello.Protocol of a browser's channel: web/1 frames.
const ProtocolWeb = "web/1"

// Welcome is what the machine sends a device it has just paired (JSON,
// inside the pairing channel).
type Welcome struct {
	MachineID   string `json:"machine_id,omitempty"`
	MachineName string `json:"machine_name,omitempty"`
	DeviceID    string `json:"device_id,omitempty"`
	// Token is the device's relay credential, scoped to this machine.
	Token string `json:"token,omitempty"`
	// Error, if set, says why pairing failed after the handshake.
	Error string `json:"error,omitempty"`
	// Share is set for a device paired with a session share's code: the
	// one session it may see, and how (docs/security.md, "Sharing a
	// session").
	Share *WelcomeShare `json:"share,omitempty"`
}

// WelcomeShare is what a share's device is told of its share.
type WelcomeShare struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	Mode      string    `json:"mode"` // "read" or "answer"
	ExpiresAt time.Time `json:"expires_at"`
}

// Stored is the device's answer once it stored the pairing.
const Stored = "stored"
