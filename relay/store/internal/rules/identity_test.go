package rules

import (
	"errors"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
)

func TestSerial(t *testing.T) {
	tests := []struct {
		serial string
		ok     bool
	}{
		{"0a", true},
		{"0123456789abcdef", true},
		{"", false},
		{"0A", false},
		{"0x0a", false},
		{"0a ", false},
	}
	for _, tt := range tests {
		if err := Serial(tt.serial); (err == nil) != tt.ok || (err != nil && !errors.Is(err, store.ErrInvalid)) {
			t.Errorf("Serial(%q) = %v; want ok=%v", tt.serial, err, tt.ok)
		}
	}
}

func TestAuditFilter(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		want  int // -1: ErrInvalid
	}{
		{"default", 0, DefaultAuditLimit},
		{"set", 5, 5},
		{"max", MaxAuditLimit, MaxAuditLimit},
		{"negative", -1, -1},
		{"over max", MaxAuditLimit + 1, -1},
	}
	for _, tt := range tests {
		f := store.AuditFilter{Limit: tt.limit}
		err := AuditFilter(&f)
		if tt.want < 0 {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("%s: AuditFilter = %v; want ErrInvalid", tt.name, err)
			}
			continue
		}
		if err != nil || f.Limit != tt.want {
			t.Errorf("%s: AuditFilter = %v, limit %d; want %d", tt.name, err, f.Limit, tt.want)
		}
	}
}

func TestChange(t *testing.T) {
	tests := []struct {
		kind, id string
		want     store.Change
	}{
		{"token", "t1", store.Change{Kind: store.ChangeToken, ID: "t1"}},
		{"user", "u", store.Change{Kind: store.ChangeUser, ID: "u"}},
		{"member", "u", store.Change{Kind: store.ChangeMembership, ID: "u"}},
		{"machine", "m", store.Change{Kind: store.ChangeMachine, ID: "m"}},
		{"all", "ignored", store.Change{Kind: store.ChangeAll}},
		{"team", "red", store.Change{Kind: store.ChangeAll}},
		{"", "", store.Change{Kind: store.ChangeAll}},
	}
	for _, tt := range tests {
		if got := Change(tt.kind, tt.id); got != tt.want {
			t.Errorf("Change(%q, %q) = %+v; want %+v", tt.kind, tt.id, got, tt.want)
		}
	}
}
