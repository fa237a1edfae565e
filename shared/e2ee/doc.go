// Package e2ee implements BetCode's end-to-end encrypted channel between a
// paired device (the betcode CLI, later a browser) and a machine (the
// betcode-agent daemon), carried by a relay that can route and count the
// channel's messages but neither read nor forge them.
//
// The cryptography is the Noise protocol framework (github.com/flynn/noise),
// cipher suite 25519_ChaChaPoly_SHA256; this package adds no primitive of its
// own. Each side has a static X25519 key pair (KeyPair, LoadOrCreateKey) and
// names the other's key by the SHA-256 fingerprint of its public key
// (Fingerprint, FingerprintID).
//
// # Carrier
//
// A Transport is an ordered, message-preserving pipe: in production a gRPC
// bidi stream of ChannelService.Open or .Pair, whose every frame carries one
// Noise message (at most 65535 bytes). Pipe gives an in-memory pair for tests.
//
// # Pairing: Noise_XXpsk3_25519_ChaChaPoly_SHA256
//
// `betcode-agent pair` prints a PairingCode: the relay's address, the machine
// id, the machine key's fingerprint, an offer id, a one-time secret of 256
// bits and a relay ticket. The device runs PairDevice, the machine
// PairMachine:
//
//	prologue  "betcode e2ee v1 pair\x00" + machineID
//	psk       HKDF-SHA256(secret, salt "betcode pairing v1", info machineID+"\x00"+offer), 32 bytes
//	-> e                      payload: the offer id (public: it picks the offer's secret)
//	<- e, ee, s, es           payload: empty
//	   the device checks s against the code's fingerprint, and stops if it differs
//	-> s, se, psk             payload: the device's hello (its name)
//	<- transport message      payload: 0x00, the machine's proof that it holds the psk
//
// The secret never reaches the relay, so the relay cannot complete message 3
// or forge the confirmation; a substituted machine key fails the fingerprint
// check even if the code leaked. Both sides then hold each other's static key,
// and the machine sends the device its credentials with WriteMessage.
//
// # Channel: Noise_IK_25519_ChaChaPoly_SHA256
//
// Every later connection runs Dial on the device and Accept on the machine:
//
//	prologue  "betcode e2ee v1 open\x00" + machineID
//	<- s                      (pre-message: the device knows the machine's key from pairing)
//	-> e, es, s, ss           payload: the device's hello (encrypted, not forward secret)
//	<- e, ee, se              payload: the answer: 0x00 (admitted) or 0x01 + reason (refused)
//
// The machine decides from the device's static key (and hello) whether it is
// a paired, unrevoked device; a refused device gets the authenticated reason.
// After message 2 a Conn carries a byte stream (a net.Conn: the device runs
// the agent's gRPC API over it) in transport messages of at most
// 65535-16 bytes of plaintext. Each is sealed with ChaCha20-Poly1305 under a
// counter nonce, so a message that is altered, dropped, replayed or reordered
// fails to open and ends the channel (ErrIntegrity). The relay can still end a
// channel early, at a message boundary: the reader then sees io.EOF, and the
// protocol above (HTTP/2) notices the unfinished exchange.
//
// # Sealed envelopes: Noise_X_25519_ChaChaPoly_SHA256
//
// A device that cannot open a channel (its machine is offline) seals one
// message instead (Seal, OpenSealed; docs/e2ee-wire.md §3):
//
//	prologue  "betcode e2ee v1 seal\x00" + machineID
//	<- s                      (pre-message: the machine's key from pairing)
//	-> e, es, s, ss           payload: a Sealed (JSON)
//
// The relay stores and forwards it; only the machine opens it, and the ss
// term proves which device sealed it. It is not forward secret, and it
// replays: the machine refuses a payload whose id it has taken or whose
// time is too old.
package e2ee

import "github.com/flynn/noise"

// suite is the one cipher suite of protocol version 1.
var suite = noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashSHA256)

const (
	// openPrologue, followed by the machine id, binds a channel's handshake
	// to the machine the device means to reach.
	openPrologue = "betcode e2ee v1 open\x00"
	// pairPrologue does the same for a pairing.
	pairPrologue = "betcode e2ee v1 pair\x00"
	// sealPrologue, followed by the machine id, binds a sealed envelope
	// (Noise_X, seal.go) to the machine it is for.
	sealPrologue = "betcode e2ee v1 seal\x00"
	// pskSalt is the HKDF salt of the pairing PSK.
	pskSalt = "betcode pairing v1"
	// pskPlacement is the 3 of XXpsk3: the PSK enters with message 3.
	pskPlacement = 3

	// tagLen is the ChaCha20-Poly1305 tag that every sealed message carries.
	tagLen = 16
	// MaxPayload is the most plaintext one transport message carries: a
	// Noise message is at most 65535 bytes, tag included.
	MaxPayload = noise.MaxMsgLen - tagLen
	// MaxHello bounds the hello a device sends in Dial and PairDevice.
	MaxHello = 4096
	// MaxReason bounds the reason of a refusal, in bytes of UTF-8.
	MaxReason = 1024
)

// Answer statuses: the first byte of IK message 2's payload, and the pairing
// confirmation.
const (
	statusOK      byte = 0
	statusRefused byte = 1
)
