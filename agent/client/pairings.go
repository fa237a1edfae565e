package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// Pairing is one machine this device paired with (`betcode pair`): where
// it is, its pinned channel key, and the relay credential scoped to it.
type Pairing struct {
	MachineID   string    `json:"machine_id"`
	MachineName string    `json:"machine_name"`
	Relay       string    `json:"relay"`
	RelayCA     string    `json:"relay_ca,omitempty"` // absolute path; empty: the system roots
	MachineKey  []byte    `json:"machine_key"`
	Fingerprint string    `json:"fingerprint"`
	DeviceID    string    `json:"device_id"` // this device's id on the machine
	Token       string    `json:"token"`     // the relay credential, scoped to the machine
	PairedAt    time.Time `json:"paired_at"`
}

// Pairings are this device's pairings, in $XDG_CONFIG_HOME/betcode (0600).
type Pairings struct {
	// Current is the machine commands reach when none is named.
	Current  string    `json:"current,omitempty"`
	Machines []Pairing `json:"machines"`
}

// configDir is $XDG_CONFIG_HOME/betcode, or ~/.config/betcode.
func configDir() (string, error) {
	p, err := CredentialsPath()
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// PairingsPath is the pairings file; DeviceKeyPath this device's channel
// key (made at the first pairing, 0600, never sent anywhere).
func PairingsPath() (string, error) {
	d, err := configDir()
	return filepath.Join(d, "pairings.json"), err
}

// DeviceKeyPath is this device's channel key file.
func DeviceKeyPath() (string, error) {
	d, err := configDir()
	return filepath.Join(d, "device.key"), err
}

// LoadPairings reads the pairings at path; none is an empty list.
func LoadPairings(path string) (*Pairings, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Pairings{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pairings: %w", err)
	}
	var p Pairings
	if err := json.Unmarshal(b, &p); err != nil {
		// It holds tokens: say only where it is.
		return nil, fmt.Errorf("pairings file %s is not valid JSON: move it aside and pair again", path)
	}
	return &p, nil
}

// Save writes the pairings to path (directory 0700, file 0600).
func (p *Pairings) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save pairings: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("save pairings: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save pairings: %w", err)
	}
	return nil
}

// Put adds or replaces the pairing of m.MachineID and makes it current.
func (p *Pairings) Put(m Pairing) {
	p.Machines = slices.DeleteFunc(p.Machines, func(o Pairing) bool { return o.MachineID == m.MachineID })
	p.Machines = append(p.Machines, m)
	p.Current = m.MachineID
}

// Find returns the pairing of machine (its id, or its name when that is
// unique), or of the current machine when machine is "".
func (p *Pairings) Find(machine string) (Pairing, bool) {
	if machine == "" {
		machine = p.Current
	}
	if machine == "" {
		if len(p.Machines) == 1 {
			return p.Machines[0], true
		}
		return Pairing{}, false
	}
	var byName []Pairing
	for _, m := range p.Machines {
		if m.MachineID == machine {
			return m, true
		}
		if strings.EqualFold(m.MachineName, machine) {
			byName = append(byName, m)
		}
	}
	if len(byName) == 1 {
		return byName[0], true
	}
	return Pairing{}, false
}

// LoadDevice returns this device's channel key and pairings.
func LoadDevice() (e2ee.KeyPair, *Pairings, error) {
	kp, err := DeviceKeyPath()
	if err != nil {
		return e2ee.KeyPair{}, nil, err
	}
	key, err := e2ee.LoadOrCreateKey(kp)
	if err != nil {
		return e2ee.KeyPair{}, nil, fmt.Errorf("this device's channel key: %w", err)
	}
	pp, err := PairingsPath()
	if err != nil {
		return e2ee.KeyPair{}, nil, err
	}
	p, err := LoadPairings(pp)
	return key, p, err
}

// PrintDevices prints a machine's paired devices as a table (betcode
// devices list and betcode-agent devices list).
func PrintDevices(out io.Writer, devices []*pb.Device) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tPAIRED\tLAST SEEN\tSTATUS\tKEY FINGERPRINT")
	for _, d := range devices {
		seen, status := "-", "active"
		if d.LastSeen != nil {
			seen = d.LastSeen.AsTime().Local().Format(time.DateTime)
		}
		if d.RevokedAt != nil {
			status = "revoked " + d.RevokedAt.AsTime().Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Id, d.Name, d.PairedAt.AsTime().Local().Format(time.DateTime), seen, status, d.Fingerprint)
	}
	w.Flush()
}
