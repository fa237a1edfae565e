package e2ee

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/flynn/noise"
)

// errPairingUnauthenticated is the device's word for every way the pairing
// can fail to prove itself from the machine's side.
var errPairingUnauthenticated = fmt.Errorf("%w: the handshake did not authenticate: the code is wrong, expired or already used, "+
	"or the relay altered the exchange", ErrPairingFailed)

// pairingPSK derives the Noise PSK of a pairing from its secret.
func pairingPSK(secret []byte, machineID, offer string) ([]byte, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("pairing secret of %d bytes is under the minimum of %d", len(secret), MinSecret)
	}
	psk, err := hkdf.Key(sha256.New, secret, []byte(pskSalt), machineID+"\x00"+offer, 32)
	if err != nil {
		return nil, fmt.Errorf("derive pairing key: %w", err)
	}
	return psk, nil
}

// pairConfig is the Noise configuration of either side of a pairing; the
// device, which knows the secret from the start, passes psk.
func pairConfig(initiator bool, self KeyPair, machineID string, psk []byte, rng io.Reader) noise.Config {
	return noise.Config{
		CipherSuite:           suite,
		Random:                rng,
		Pattern:               noise.HandshakeXX,
		Initiator:             initiator,
		Prologue:              []byte(pairPrologue + machineID),
		PresharedKey:          psk,
		PresharedKeyPlacement: pskPlacement,
		StaticKeypair:         self.dh(),
	}
}

// PairDevice pairs this device with the machine that printed code, over t
// (the Noise_XXpsk3 initiator): device is this device's key pair, and hello
// (at most MaxHello bytes: its name) goes to the machine.
//
// The returned Conn's PeerStatic is the machine's key, checked against
// code.Fingerprint; the caller then reads the machine's payloads with
// ReadMessage. A machine key that does not match the code fails with an
// error wrapping ErrKeyMismatch, before the device reveals its own key or
// hello; any other failure of the machine to prove the pairing fails with
// an error wrapping ErrPairingFailed. On any failure PairDevice closes t.
func PairDevice(ctx context.Context, t Transport, device KeyPair, code PairingCode, hello []byte) (*Conn, error) {
	return pairDevice(ctx, t, device, code, hello, nil)
}

// pairDevice is PairDevice with the handshake's randomness (nil:
// crypto/rand).
func pairDevice(ctx context.Context, t Transport, device KeyPair, code PairingCode, hello []byte, rng io.Reader) (_ *Conn, err error) {
	var c *Conn
	defer func() {
		if err != nil {
			if c != nil {
				_ = c.Close()
			} else {
				_ = t.Close()
			}
			err = fmt.Errorf("pair with machine %s: %w", code.MachineID, err)
		}
	}()
	if err := code.Validate(); err != nil {
		return nil, err
	}
	if len(hello) > MaxHello {
		return nil, fmt.Errorf("hello of %d bytes is over the limit of %d", len(hello), MaxHello)
	}
	if err := device.check(); err != nil {
		return nil, fmt.Errorf("device key: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	psk, err := pairingPSK(code.Secret, code.MachineID, code.Offer)
	if err != nil {
		return nil, err
	}
	hs, err := noise.NewHandshakeState(pairConfig(true, device, code.MachineID, psk, rng))
	if err != nil {
		return nil, fmt.Errorf("start handshake: %w", err)
	}
	msg1, _, _, err := hs.WriteMessage(nil, []byte(code.Offer))
	if err != nil {
		return nil, fmt.Errorf("pairing message 1: %w", err)
	}
	rx := &receiver{t: t}
	if err := t.Send(msg1); err != nil {
		// A carrier that ended (a gRPC stream the relay refused) tells why
		// on its receiving side.
		if errors.Is(err, io.EOF) {
			if _, rerr := handshakeRecv(ctx, rx, "pairing message 2"); rerr != nil && !errors.Is(rerr, io.EOF) {
				return nil, rerr
			}
		}
		return nil, fmt.Errorf("send pairing message 1: %w", err)
	}
	msg2, err := handshakeRecv(ctx, rx, "pairing message 2")
	if errors.Is(err, io.EOF) {
		return nil, errPairingUnauthenticated
	}
	if err != nil {
		return nil, err
	}
	payload, _, _, err := hs.ReadMessage(nil, msg2)
	if err != nil {
		return nil, errPairingUnauthenticated
	}
	if len(payload) != 0 {
		return nil, fmt.Errorf("pairing message 2 carries %d bytes, where this version expects none", len(payload))
	}
	machinePub := bytes.Clone(hs.PeerStatic())
	if !MatchesFingerprint(machinePub, code.Fingerprint) {
		return nil, fmt.Errorf("%w: %w", ErrPairingFailed, ErrKeyMismatch)
	}
	msg3, send, recv, err := hs.WriteMessage(nil, hello)
	if err != nil {
		return nil, fmt.Errorf("pairing message 3: %w", err)
	}
	if err := t.Send(msg3); err != nil {
		return nil, fmt.Errorf("send pairing message 3: %w", err)
	}
	c = newConn(t, rx, send, recv,
		Addr{Role: RoleDevice, MachineID: code.MachineID, Fingerprint: Fingerprint(device.Public)},
		Addr{Role: RoleMachine, MachineID: code.MachineID, Fingerprint: Fingerprint(machinePub)},
		machinePub)
	// Message 3 proved the secret to the machine; this proves it back.
	c.rmu.Lock()
	confirm, err := c.readMsg(ctx.Done())
	c.rmu.Unlock()
	switch {
	case errors.Is(err, errCtxDone):
		return nil, fmt.Errorf("wait for the machine's confirmation: %w", context.Cause(ctx))
	case err != nil:
		return nil, errPairingUnauthenticated
	case len(confirm) != 1 || confirm[0] != statusOK:
		return nil, fmt.Errorf("the machine's confirmation is malformed (%d bytes)", len(confirm))
	}
	return c, nil
}

// PairMachine runs the machine's side of a pairing over t (the Noise_XXpsk3
// responder): machine is this machine's key pair, machineID its id.
//
// lookup gets the offer id that the device's first message names and returns
// that offer's secret, or an error (an unknown, expired or used offer), which
// abandons the pairing. A code is single use: lookup should retire the offer
// it answers for, so that a failed attempt also ends it.
//
// PairMachine returns the Conn, whose PeerStatic is the device's key, and the
// device's hello; the caller then sends the device its payloads with
// WriteMessage. A device that does not prove the secret fails with an error
// wrapping ErrPairingFailed. On any failure PairMachine closes t.
func PairMachine(ctx context.Context, t Transport, machine KeyPair, machineID string, lookup func(offer string) (secret []byte, err error)) (*Conn, []byte, error) {
	return pairMachine(ctx, t, machine, machineID, lookup, nil)
}

// pairMachine is PairMachine with the handshake's randomness (nil:
// crypto/rand).
func pairMachine(ctx context.Context, t Transport, machine KeyPair, machineID string, lookup func(string) ([]byte, error), rng io.Reader) (_ *Conn, _ []byte, err error) {
	var c *Conn
	defer func() {
		if err != nil {
			if c != nil {
				_ = c.Close()
			} else {
				_ = t.Close()
			}
			err = fmt.Errorf("pairing a device: %w", err)
		}
	}()
	switch {
	case machineID == "":
		return nil, nil, errors.New("no machine id")
	case lookup == nil:
		return nil, nil, errors.New("no offer lookup function")
	}
	if err := machine.check(); err != nil {
		return nil, nil, fmt.Errorf("machine key: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	// The PSK is set once message 1 names the offer; XXpsk3 needs it only
	// from message 3.
	hs, err := noise.NewHandshakeState(pairConfig(false, machine, machineID, nil, rng))
	if err != nil {
		return nil, nil, fmt.Errorf("start handshake: %w", err)
	}
	rx := &receiver{t: t}
	msg1, err := handshakeRecv(ctx, rx, "pairing message 1")
	if errors.Is(err, io.EOF) {
		return nil, nil, errors.New("the carrier ended before the pairing began")
	}
	if err != nil {
		return nil, nil, err
	}
	payload, _, _, err := hs.ReadMessage(nil, msg1)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: pairing message 1 did not authenticate: the device's code names another machine id, "+
			"or the relay altered the message", ErrPairingFailed)
	}
	offer := string(payload)
	if !validOffer(offer) {
		return nil, nil, fmt.Errorf("pairing message 1 names no offer (%d bytes where an offer id is expected)", len(payload))
	}
	secret, err := lookup(offer)
	if err != nil {
		return nil, nil, fmt.Errorf("pairing offer %s: %w", offer, err)
	}
	psk, err := pairingPSK(secret, machineID, offer)
	if err != nil {
		return nil, nil, fmt.Errorf("pairing offer %s: %w", offer, err)
	}
	if err := hs.SetPresharedKey(psk); err != nil {
		return nil, nil, fmt.Errorf("pairing offer %s: %w", offer, err)
	}
	msg2, _, _, err := hs.WriteMessage(nil, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("pairing message 2: %w", err)
	}
	if err := t.Send(msg2); err != nil {
		return nil, nil, fmt.Errorf("send pairing message 2: %w", err)
	}
	msg3, err := handshakeRecv(ctx, rx, "pairing message 3")
	if errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("%w: the device ended the exchange after seeing this machine's key: "+
			"its code names another key (something between them substituted this one), or it gave up", ErrPairingFailed)
	}
	if err != nil {
		return nil, nil, err
	}
	hello, recv, send, err := hs.ReadMessage(nil, msg3)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the device did not prove the pairing secret of offer %s: a wrong or stale code, "+
			"or the exchange was altered in transit", ErrPairingFailed, offer)
	}
	if len(hello) > MaxHello {
		return nil, nil, fmt.Errorf("hello of %d bytes is over the limit of %d", len(hello), MaxHello)
	}
	devicePub := bytes.Clone(hs.PeerStatic())
	c = newConn(t, rx, send, recv,
		Addr{Role: RoleMachine, MachineID: machineID, Fingerprint: Fingerprint(machine.Public)},
		Addr{Role: RoleDevice, MachineID: machineID, Fingerprint: Fingerprint(devicePub)},
		devicePub)
	if err := c.WriteMessage([]byte{statusOK}); err != nil {
		return nil, nil, fmt.Errorf("send the pairing confirmation: %w", err)
	}
	return c, hello, nil
}
