package e2ee

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/flynn/noise"
)

// Dial opens an end-to-end channel to machine machineID over t, as the device
// (the Noise_IK initiator): device is this device's key pair, machinePub the
// machine's static key as pairing pinned it, and hello (at most MaxHello
// bytes: a device name and version, nothing secret, since it is not forward
// secret) goes to the machine's authorize.
//
// If the machine refuses the device, Dial returns a *RefusedError (which
// errors.Is ErrRefused) with the machine's authenticated reason. When ctx
// ends, Dial stops waiting and fails. On any failure Dial closes t; on
// success the Conn owns it.
func Dial(ctx context.Context, t Transport, device KeyPair, machineID string, machinePub []byte, hello []byte) (*Conn, error) {
	return dial(ctx, t, device, machineID, machinePub, hello, nil)
}

// dial is Dial with the handshake's randomness (nil: crypto/rand), which
// tests fix.
func dial(ctx context.Context, t Transport, device KeyPair, machineID string, machinePub, hello []byte, rng io.Reader) (c *Conn, err error) {
	defer func() {
		if err != nil {
			_ = t.Close()
			err = fmt.Errorf("end-to-end channel to machine %s: %w", machineID, err)
		}
	}()
	switch {
	case machineID == "":
		return nil, errors.New("no machine id")
	case len(machinePub) != KeyLen:
		return nil, fmt.Errorf("the machine's key is %d bytes, not %d", len(machinePub), KeyLen)
	case len(hello) > MaxHello:
		return nil, fmt.Errorf("hello of %d bytes is over the limit of %d", len(hello), MaxHello)
	}
	if err := device.check(); err != nil {
		return nil, fmt.Errorf("device key: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hs, err := noise.NewHandshakeState(noise.Config{
		CipherSuite:   suite,
		Random:        rng,
		Pattern:       noise.HandshakeIK,
		Initiator:     true,
		Prologue:      []byte(openPrologue + machineID),
		StaticKeypair: device.dh(),
		PeerStatic:    machinePub,
	})
	if err != nil {
		return nil, fmt.Errorf("start handshake: %w", err)
	}
	msg1, _, _, err := hs.WriteMessage(nil, hello)
	if err != nil {
		return nil, fmt.Errorf("handshake message 1: %w", err)
	}
	rx := &receiver{t: t}
	if err := t.Send(msg1); err != nil {
		// A carrier that ended (a gRPC stream the relay refused) tells why
		// on its receiving side.
		if errors.Is(err, io.EOF) {
			if _, rerr := handshakeRecv(ctx, rx, "handshake message 2"); rerr != nil && !errors.Is(rerr, io.EOF) {
				return nil, rerr
			}
		}
		return nil, fmt.Errorf("send handshake message 1: %w", err)
	}
	msg2, err := handshakeRecv(ctx, rx, "handshake message 2")
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the machine ended the channel without answering: " +
			"this device's record of the machine's key or id may be stale (pair again)")
	}
	if err != nil {
		return nil, err
	}
	answer, send, recv, err := hs.ReadMessage(nil, msg2)
	if err != nil {
		return nil, fmt.Errorf("the machine's answer did not authenticate: it does not hold the key this device paired with, "+
			"or the relay altered the exchange: %w", err)
	}
	if refused, err := parseAnswer(answer); err != nil {
		return nil, err
	} else if refused != nil {
		return nil, refused
	}
	return newConn(t, rx, send, recv,
		Addr{Role: RoleDevice, MachineID: machineID, Fingerprint: Fingerprint(device.Public)},
		Addr{Role: RoleMachine, MachineID: machineID, Fingerprint: Fingerprint(machinePub)},
		bytes.Clone(machinePub)), nil
}

// Accept runs the machine's side of an end-to-end channel over t (the
// Noise_IK responder): machine is this machine's key pair, machineID its id.
//
// authorize is called with the device's static public key, which the
// handshake authenticated, and its hello (see Dial). If it returns an error,
// Accept still answers, with the error's text as the refusal reason (cut to
// MaxReason bytes), so that the device can show why; Accept then returns an
// error wrapping ErrRefused and authorize's error. When ctx ends, Accept
// stops waiting and fails. On any failure Accept closes t; on success the
// Conn owns it.
func Accept(ctx context.Context, t Transport, machine KeyPair, machineID string, authorize func(devicePub, hello []byte) error) (*Conn, error) {
	return accept(ctx, t, machine, machineID, authorize, nil)
}

// accept is Accept with the handshake's randomness (nil: crypto/rand).
func accept(ctx context.Context, t Transport, machine KeyPair, machineID string, authorize func(devicePub, hello []byte) error, rng io.Reader) (c *Conn, err error) {
	device := "a device"
	defer func() {
		if err != nil {
			_ = t.Close()
			err = fmt.Errorf("end-to-end channel from %s: %w", device, err)
		}
	}()
	switch {
	case machineID == "":
		return nil, errors.New("no machine id")
	case authorize == nil:
		return nil, errors.New("no authorize function")
	}
	if err := machine.check(); err != nil {
		return nil, fmt.Errorf("machine key: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hs, err := noise.NewHandshakeState(noise.Config{
		CipherSuite:   suite,
		Random:        rng,
		Pattern:       noise.HandshakeIK,
		Prologue:      []byte(openPrologue + machineID),
		StaticKeypair: machine.dh(),
	})
	if err != nil {
		return nil, fmt.Errorf("start handshake: %w", err)
	}
	rx := &receiver{t: t}
	msg1, err := handshakeRecv(ctx, rx, "handshake message 1")
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the carrier ended before the handshake began")
	}
	if err != nil {
		return nil, err
	}
	hello, _, _, err := hs.ReadMessage(nil, msg1)
	if err != nil {
		return nil, fmt.Errorf("handshake message 1 did not authenticate: the device does not hold this machine's current key "+
			"or id, or the relay altered the message: %w", err)
	}
	devicePub := bytes.Clone(hs.PeerStatic())
	device = "device " + FingerprintID(devicePub)
	if len(hello) > MaxHello {
		return nil, fmt.Errorf("hello of %d bytes is over the limit of %d", len(hello), MaxHello)
	}
	verdict := authorize(bytes.Clone(devicePub), hello)
	msg2, recv, send, err := hs.WriteMessage(nil, encodeAnswer(verdict))
	if err != nil {
		return nil, fmt.Errorf("handshake message 2: %w", err)
	}
	if err := t.Send(msg2); err != nil {
		return nil, fmt.Errorf("send handshake message 2: %w", err)
	}
	if verdict != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, verdict)
	}
	return newConn(t, rx, send, recv,
		Addr{Role: RoleMachine, MachineID: machineID, Fingerprint: Fingerprint(machine.Public)},
		Addr{Role: RoleDevice, MachineID: machineID, Fingerprint: Fingerprint(devicePub)},
		devicePub), nil
}

// encodeAnswer is the payload of IK message 2: statusOK, or statusRefused
// followed by the reason.
func encodeAnswer(verdict error) []byte {
	if verdict == nil {
		return []byte{statusOK}
	}
	reason := truncateUTF8(verdict.Error(), MaxReason)
	return append([]byte{statusRefused}, reason...)
}

// parseAnswer decodes IK message 2's payload: a *RefusedError if the machine
// refused, an error if the payload is malformed.
func parseAnswer(p []byte) (*RefusedError, error) {
	switch {
	case len(p) == 0:
		return nil, errors.New("the machine's answer is empty")
	case p[0] == statusOK && len(p) == 1:
		return nil, nil
	case p[0] == statusOK:
		return nil, fmt.Errorf("the machine's answer has %d bytes after its status", len(p)-1)
	case p[0] == statusRefused && len(p)-1 > MaxReason:
		return nil, fmt.Errorf("the machine's refusal reason is %d bytes, over the limit of %d", len(p)-1, MaxReason)
	case p[0] == statusRefused:
		return &RefusedError{Reason: truncateUTF8(string(p[1:]), MaxReason)}, nil
	}
	return nil, fmt.Errorf("the machine's answer has status %d, which this version does not know", p[0])
}
