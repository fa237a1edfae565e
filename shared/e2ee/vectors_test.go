package e2ee

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The browser (web/src/e2ee) implements the same handshakes in TypeScript.
// TestVectors checks that the vectors checked in at vectorsPath are what
// this package makes from fixed keys and fixed handshake randomness; with
// -update it writes them. web/test/e2ee.test.ts reproduces every message the
// device sends, byte for byte, and opens every message the machine sends.
//
//	go test ./shared/e2ee -run TestVectors -update
var updateVectors = flag.Bool("update", false, "write the browser's interop vectors ("+vectorsPath+")")

// vectorsPath is the browser's copy of the vectors, from this package.
const vectorsPath = "../../web/test/testdata/e2ee-vectors.json"

// vecHex is bytes in JSON as lower-case hex.
type vecHex []byte

func (h vecHex) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

func (h *vecHex) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	*h = v
	return err
}

type vecKey struct {
	Private vecHex `json:"private"`
	Public  vecHex `json:"public"`
}

// vecMessage is one transport message: who sent it, its plaintext (a web/1
// frame, or a pairing payload), and the message.
type vecMessage struct {
	From      string `json:"from"` // "device" or "machine"
	Plaintext vecHex `json:"plaintext"`
	Message   vecHex `json:"message"`
}

type vectors struct {
	Comment     string `json:"comment"`
	Device      vecKey `json:"device"`
	Machine     vecKey `json:"machine"`
	Fingerprint struct {
		Public vecHex `json:"public"`
		Long   string `json:"fingerprint"`
		ID     string `json:"id"`
	} `json:"fingerprint"`
	IK struct {
		MachineID        string       `json:"machine_id"`
		Hello            string       `json:"hello"`
		DeviceEphemeral  vecHex       `json:"device_ephemeral"`
		MachineEphemeral vecHex       `json:"machine_ephemeral"`
		Msg1             vecHex       `json:"msg1"`
		Msg2             vecHex       `json:"msg2"`
		Transport        []vecMessage `json:"transport"`
	} `json:"ik"`
	IKRefused struct {
		DeviceEphemeral  vecHex `json:"device_ephemeral"`
		MachineEphemeral vecHex `json:"machine_ephemeral"`
		Reason           string `json:"reason"`
		Msg1             vecHex `json:"msg1"`
		Msg2             vecHex `json:"msg2"`
	} `json:"ik_refused"`
	Pair struct {
		Code             string       `json:"code"`
		MachineID        string       `json:"machine_id"`
		Relay            string       `json:"relay"`
		Offer            string       `json:"offer"`
		Secret           vecHex       `json:"secret"`
		Ticket           string       `json:"ticket"`
		Fingerprint      string       `json:"fingerprint"`
		PSK              vecHex       `json:"psk"`
		Hello            string       `json:"hello"`
		DeviceEphemeral  vecHex       `json:"device_ephemeral"`
		MachineEphemeral vecHex       `json:"machine_ephemeral"`
		Msg1             vecHex       `json:"msg1"`
		Msg2             vecHex       `json:"msg2"`
		Msg3             vecHex       `json:"msg3"`
		Transport        []vecMessage `json:"transport"` // the confirmation, the Welcome, "stored"
	} `json:"pair"`
	Seal struct {
		MachineID       string `json:"machine_id"`
		Prologue        string `json:"prologue"`
		DeviceEphemeral vecHex `json:"device_ephemeral"`
		Payload         string `json:"payload"`
		Message         vecHex `json:"message"`
	} `json:"seal"`
}

// vecBytes is n fixed bytes named by label.
func vecBytes(label string, n int) []byte {
	var out []byte
	for i := byte(0); len(out) < n; i++ {
		s := sha256.Sum256(append([]byte("betcode e2ee vectors: "+label), i))
		out = append(out, s[:]...)
	}
	return out[:n]
}

// webFrame is a web/1 frame: the 4-byte big-endian length of j, then j.
func webFrame(j string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(j))), j...)
}

// makeVectors runs the handshakes with fixed keys and randomness.
func makeVectors(t *testing.T) vectors {
	t.Helper()
	ctx := testCtx(t)
	var v vectors
	v.Comment = "written by go test ./shared/e2ee -run TestVectors -update (shared/e2ee/vectors_test.go); bytes in hex"
	device := mustKeyPair(vecBytes("device static", KeyLen))
	machine := mustKeyPair(vecBytes("machine static", KeyLen))
	v.Device = vecKey{device.Private, device.Public}
	v.Machine = vecKey{machine.Private, machine.Public}
	v.Fingerprint.Public = machine.Public
	v.Fingerprint.Long = Fingerprint(machine.Public)
	v.Fingerprint.ID = FingerprintID(machine.Public)

	// Noise_IK: a channel, and web/1 frames both ways.
	const machineID = "m-vectors01"
	v.IK.MachineID = machineID
	v.IK.Hello = `{"name":"Vector Phone","version":"web 1.0.0","protocol":"web/1"}`
	v.IK.DeviceEphemeral = vecBytes("ik device ephemeral", KeyLen)
	v.IK.MachineEphemeral = vecBytes("ik machine ephemeral", KeyLen)
	dt, mt := Pipe()
	drec := &recorder{Transport: dt}
	mrec := &recorder{Transport: mt}
	acc := make(chan result, 1)
	go func() {
		c, err := accept(ctx, mrec, machine, machineID, allow(device), bytes.NewReader(v.IK.MachineEphemeral))
		acc <- result{c, err}
	}()
	dc, err := dial(ctx, drec, device, machineID, machine.Public, []byte(v.IK.Hello), bytes.NewReader(v.IK.DeviceEphemeral))
	if err != nil {
		t.Fatal(err)
	}
	ar := <-acc
	if ar.err != nil {
		t.Fatal(ar.err)
	}
	mc := ar.c
	exchange := func(from string, plain []byte) vecMessage {
		t.Helper()
		w, r, rec := dc, mc, drec
		if from == "machine" {
			w, r, rec = mc, dc, mrec
		}
		if err := w.WriteMessage(plain); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadMessage()
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%s's message: %q, %v", from, got, err)
		}
		sent := rec.messages()
		return vecMessage{From: from, Plaintext: plain, Message: sent[len(sent)-1]}
	}
	v.IK.Transport = []vecMessage{
		exchange("device", webFrame(`{"t":"req","id":1,"method":"GET","path":"/sessions?limit=5"}`)),
		exchange("machine", webFrame(`{"t":"res","id":1,"status":200,"body":"{\"sessions\":[]}"}`)),
		exchange("device", webFrame(`{"t":"req","id":2,"method":"POST","path":"/sessions","body":"{\"workspace\":\"w\"}"}`)),
		exchange("machine", append(webFrame(`{"t":"res","id":2,"status":201,"body":"{}"}`), webFrame(`{"t":"ws","data":"{\"type\":\"ready\"}"}`)...)),
	}
	v.IK.Msg1, v.IK.Msg2 = drec.messages()[0], mrec.messages()[0]
	dc.Close()
	mc.Close()

	// Noise_IK refused.
	v.IKRefused.DeviceEphemeral = vecBytes("ik refused device ephemeral", KeyLen)
	v.IKRefused.MachineEphemeral = vecBytes("ik refused machine ephemeral", KeyLen)
	v.IKRefused.Reason = "this device was revoked on 2026-12-01"
	dt, mt = Pipe()
	drec = &recorder{Transport: dt}
	mrec = &recorder{Transport: mt}
	go func() {
		_, err := accept(ctx, mrec, machine, machineID, func([]byte, []byte) error { return errors.New(v.IKRefused.Reason) },
			bytes.NewReader(v.IKRefused.MachineEphemeral))
		acc <- result{nil, err}
	}()
	_, err = dial(ctx, drec, device, machineID, machine.Public, []byte(v.IK.Hello), bytes.NewReader(v.IKRefused.DeviceEphemeral))
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Reason != v.IKRefused.Reason {
		t.Fatalf("refused dial: %v", err)
	}
	if ar := <-acc; !errors.Is(ar.err, ErrRefused) {
		t.Fatalf("refusing accept: %v", ar.err)
	}
	v.IKRefused.Msg1, v.IKRefused.Msg2 = drec.messages()[0], mrec.messages()[0]

	// Noise_XXpsk3: a pairing, its Welcome and the device's "stored".
	code := PairingCode{Relay: "relay.example.com:443", MachineID: machineID, Fingerprint: Fingerprint(machine.Public),
		Offer: hex.EncodeToString(vecBytes("offer", offerLen)), Secret: vecBytes("secret", secretLen), Ticket: "bct_vectorsTicket0123456789"}
	v.Pair.Code = code.String()
	v.Pair.MachineID, v.Pair.Relay, v.Pair.Offer, v.Pair.Secret, v.Pair.Ticket, v.Pair.Fingerprint =
		code.MachineID, code.Relay, code.Offer, code.Secret, code.Ticket, code.Fingerprint
	if v.Pair.PSK, err = pairingPSK(code.Secret, machineID, code.Offer); err != nil {
		t.Fatal(err)
	}
	v.Pair.Hello = `{"name":"Vector Phone"}`
	v.Pair.DeviceEphemeral = vecBytes("pair device ephemeral", KeyLen)
	v.Pair.MachineEphemeral = vecBytes("pair machine ephemeral", KeyLen)
	dt, mt = Pipe()
	drec = &recorder{Transport: dt}
	mrec = &recorder{Transport: mt}
	pch := make(chan pairResult, 1)
	go func() {
		c, hello, err := pairMachine(ctx, mrec, machine, machineID, func(string) ([]byte, error) { return code.Secret, nil },
			bytes.NewReader(v.Pair.MachineEphemeral))
		pch <- pairResult{c, hello, err}
	}()
	dc, err = pairDevice(ctx, drec, device, code, []byte(v.Pair.Hello), bytes.NewReader(v.Pair.DeviceEphemeral))
	if err != nil {
		t.Fatal(err)
	}
	pr := <-pch
	if pr.err != nil || string(pr.hello) != v.Pair.Hello {
		t.Fatalf("pair machine: %q, %v", pr.hello, pr.err)
	}
	mc = pr.c
	d, m := drec.messages(), mrec.messages()
	v.Pair.Msg1, v.Pair.Msg2, v.Pair.Msg3 = d[0], m[0], d[1]
	v.Pair.Transport = []vecMessage{{From: "machine", Plaintext: []byte{statusOK}, Message: m[1]},
		exchange("machine", []byte(`{"machine_id":"m-vectors01","machine_name":"vector box","device_id":"d-0123456789abcdef","token":"bct_deviceToken0123456789"}`)),
		exchange("device", []byte("stored")),
	}
	dc.Close()
	mc.Close()

	// Noise_X: a sealed envelope (docs/e2ee-wire.md §3, seal.go).
	v.Seal.MachineID = machineID
	v.Seal.Prologue = sealPrologue + machineID
	v.Seal.DeviceEphemeral = vecBytes("seal device ephemeral", KeyLen)
	payload, err := json.Marshal(Sealed{V: 1, ID: "00112233445566778899aabbccddeeff", At: 1733400000000, Kind: SealedQueue, SessionID: "s-1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	v.Seal.Payload = string(payload)
	if v.Seal.Message, err = seal(device, machineID, machine.Public, payload, bytes.NewReader(v.Seal.DeviceEphemeral)); err != nil {
		t.Fatal(err)
	}
	if pub, p, err := OpenSealed(machine, machineID, v.Seal.Message); err != nil || string(p) != v.Seal.Payload || !bytes.Equal(pub, device.Public) {
		t.Fatalf("open the sealed vector: %q, %v", p, err)
	}
	return v
}

func TestVectors(t *testing.T) {
	v := makeVectors(t)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.FromSlash(vectorsPath)
	if *updateVectors {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it: go test ./shared/e2ee -run TestVectors -update)", err)
	}
	if !bytes.Equal(old, b) {
		t.Fatalf("%s is not what this package makes: the wire format changed? If on purpose, run go test ./shared/e2ee -run TestVectors -update "+
			"and make web/src/e2ee match (npm test in web/)", vectorsPath)
	}
}
