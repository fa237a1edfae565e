package pairing

// Hello is what a device says of itself in a handshake (JSON): it travels
// encrypted, but in the handshake's first message, which is not forward
// secret, so it holds nothing more.
type Hello struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

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
}

// Stored is the device's answer once it stored the pairing.
const Stored = "stored"
