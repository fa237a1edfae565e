package postgres

import (
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
)

func TestPayload(t *testing.T) {
	long := strings.Repeat("x", maxPayload)
	tests := []struct {
		name string
		kind store.ChangeKind
		id   string
		want store.Change
	}{
		{"token", store.ChangeToken, "tok_1", store.Change{Kind: store.ChangeToken, ID: "tok_1"}},
		{"id with a colon", store.ChangeMachine, "a:b", store.Change{Kind: store.ChangeMachine, ID: "a:b"}},
		{"empty id", store.ChangeUser, "", store.Change{Kind: store.ChangeUser}},
		{"too long for NOTIFY", store.ChangeUser, long, store.Change{Kind: store.ChangeAll}},
		{"unknown kind", "team", "red", store.Change{Kind: store.ChangeAll}},
	}
	for _, tt := range tests {
		p := payload(tt.kind, tt.id)
		if len(p) > maxPayload {
			t.Errorf("%s: payload of %d bytes", tt.name, len(p))
		}
		if got := parsePayload(p); got != tt.want {
			t.Errorf("%s: parsePayload(payload(%q, %.20q)) = %+v; want %+v", tt.name, tt.kind, tt.id, got, tt.want)
		}
	}
	if got := parsePayload("garbage"); got.Kind != store.ChangeAll {
		t.Errorf("parsePayload(garbage) = %+v; want ChangeAll", got)
	}
}
