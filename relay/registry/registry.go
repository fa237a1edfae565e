// Package registry keeps the relay's live tunnels: which machine is
// connected to this replica, over which tunnel.
package registry

import (
	"sync"
	"time"

	"github.com/betcode-dev/betcode/shared/tunnel"
)

// Tunnel is one connected machine.
type Tunnel struct {
	MachineID string
	// OwnerID is the owning user (or, for a team's machine, the user who
	// enrolled it); TeamID the owning team ("" when a user owns it).
	OwnerID, TeamID string
	Client          *tunnel.Client
	ConnectedAt     time.Time
}

// Registry maps machine ids to their tunnel. Safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]*Tunnel
}

// New returns an empty Registry.
func New() *Registry { return &Registry{m: map[string]*Tunnel{}} }

// Add makes t the machine's tunnel and returns the one it replaced, if any
// (a newer connection wins: the old one is usually dead already).
func (r *Registry) Add(t *Tunnel) *Tunnel {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m[t.MachineID]
	r.m[t.MachineID] = t
	return old
}

// Remove drops t if it is still the machine's tunnel.
func (r *Registry) Remove(t *Tunnel) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[t.MachineID] == t {
		delete(r.m, t.MachineID)
	}
}

// Get returns the machine's live tunnel, or nil.
func (r *Registry) Get(machineID string) *Tunnel {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t := r.m[machineID]
	if t != nil && t.Client.Closed() {
		return nil
	}
	return t
}

// Len returns the number of connected machines.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// CloseAll closes every tunnel (at shutdown).
func (r *Registry) CloseAll() {
	r.mu.Lock()
	all := r.m
	r.m = map[string]*Tunnel{}
	r.mu.Unlock()
	for _, t := range all {
		t.Client.Close()
	}
}
