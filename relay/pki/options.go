package pki

import (
	"errors"
	"time"

	"github.com/betcode-dev/betcode/shared/mtls"
)

// Default lifetimes of the certificates.
const (
	DefaultCALifetime      = 10 * 365 * 24 * time.Hour
	DefaultServerLifetime  = 365 * 24 * time.Hour
	DefaultMachineLifetime = 365 * 24 * time.Hour
)

// backdate is subtracted from NotBefore so that a peer whose clock is a
// little behind does not see a brand-new certificate as not yet valid.
const backdate = 5 * time.Minute

// Options tunes Init, IssueRelay and IssueMachine. The zero value gives the
// defaults.
type Options struct {
	// Force replaces existing files instead of refusing to.
	Force bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Lifetimes; zero means the Default* constant. A leaf certificate never
	// outlives its CA: its lifetime is cut at the CA's expiry.
	CALifetime, ServerLifetime, MachineLifetime time.Duration
	// Owner, for IssueMachine only, is "user:NAME" or "team:NAME": the
	// machine certificate then also carries the URI SAN
	// betcode://owner/user/NAME (or .../team/NAME), which the relay reads
	// with mtls.MachineOwner. Empty: no owner SAN.
	Owner string
}

// Validate reports options that can make no useful certificate.
func (o Options) Validate() error {
	if o.CALifetime < 0 || o.ServerLifetime < 0 || o.MachineLifetime < 0 {
		return errors.New("certificate lifetimes must not be negative")
	}
	if o.Owner != "" {
		if _, err := mtls.ParseOwner(o.Owner); err != nil {
			return err
		}
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CALifetime == 0 {
		o.CALifetime = DefaultCALifetime
	}
	if o.ServerLifetime == 0 {
		o.ServerLifetime = DefaultServerLifetime
	}
	if o.MachineLifetime == 0 {
		o.MachineLifetime = DefaultMachineLifetime
	}
	return o
}
