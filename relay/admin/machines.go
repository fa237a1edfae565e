package admin

import (
	"context"
	"fmt"

	"github.com/betcode-dev/betcode/relay/store"
)

// ListMachines returns the machines the caller manages, ordered by id and
// revoked ones included: every machine for relay administrators, else the
// caller's own and those of the teams it owns or administers.
func (o *Ops) ListMachines(ctx context.Context, a Actor) (_ []store.Machine, err error) {
	p := o.begin(a, "machine.list", "", false)
	defer func() { p.end(ctx, err) }()
	c, err := o.resolve(ctx, a)
	if err != nil {
		return nil, err
	}
	all, err := o.Store.AllMachines(ctx)
	if err != nil {
		return nil, storeErr(err, "list machines")
	}
	out := all[:0]
	for _, m := range all {
		if c.manages(&m) {
			out = append(out, m)
		}
	}
	return out, nil
}

// RevokeMachine revokes machine id: the relay closes its tunnel within a
// second (the store publishes the revocation) and refuses its certificates
// from then on. Allowed to whoever manages it (ListMachines).
func (o *Ops) RevokeMachine(ctx context.Context, a Actor, id string) (err error) {
	p := o.begin(a, ActionMachineRevoked, machineTarget(id), true)
	defer func() { p.end(ctx, err) }()
	m, err := o.managedMachine(ctx, a, id, "revoking it")
	if err != nil {
		return err
	}
	if err := o.Store.RevokeMachine(ctx, id, o.now()); err != nil {
		return storeErr(err, "revoke machine %q", id)
	}
	p.detail = "revoked machine " + describe(&m)
	return nil
}

// DeleteMachine revokes machine id and forgets it and its buffered
// requests. Allowed to whoever manages it (ListMachines).
func (o *Ops) DeleteMachine(ctx context.Context, a Actor, id string) (err error) {
	p := o.begin(a, ActionMachineDeleted, machineTarget(id), true)
	defer func() { p.end(ctx, err) }()
	m, err := o.managedMachine(ctx, a, id, "deleting it")
	if err != nil {
		return err
	}
	if err := o.Store.DeleteMachine(ctx, id, o.now()); err != nil {
		return storeErr(err, "delete machine %q", id)
	}
	p.detail = "deleted machine " + describe(&m)
	return nil
}

func (o *Ops) managedMachine(ctx context.Context, a Actor, id, what string) (store.Machine, error) {
	c, err := o.resolve(ctx, a)
	if err != nil {
		return store.Machine{}, err
	}
	if err := required("machine_id", id); err != nil {
		return store.Machine{}, err
	}
	return o.machine(ctx, c, id, what)
}

// describe names m and its owner for the audit log.
func describe(m *store.Machine) string {
	if m.TeamID != "" {
		return fmt.Sprintf("%s (%q) of team %s", m.ID, m.Name, m.TeamID)
	}
	return fmt.Sprintf("%s (%q) of %s", m.ID, m.Name, m.OwnerID)
}
