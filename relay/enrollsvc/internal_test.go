package enrollsvc

import (
	"regexp"
	"strings"
	"testing"

	"github.com/betcode-dev/betcode/shared/mtls"
)

func TestMachineName(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{"laptop", "laptop", ""},
		{"", DefaultMachineName, ""},
		{" \t ", DefaultMachineName, ""},
		{"  Ada's MacBook Pro (2024)  ", "Ada's MacBook Pro (2024)", ""},
		{"ノートパソコン", "ノートパソコン", ""},
		{strings.Repeat("é", 64), strings.Repeat("é", 64), ""},
		{strings.Repeat("é", 65), "", "at most 64"},
		{"a\x00b", "", "U+0000 is not printable"},
		{"a\nb", "", "not printable"},
		{"a\u202eb", "", "U+202E is not printable"},
		{"a\u00a0b", "", "not printable"},
		{"bad \xff utf-8", "", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := machineName(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("machineName(%q) = %q, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("machineName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNewMachineID(t *testing.T) {
	re := regexp.MustCompile(`^m-[a-z2-7]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newMachineID()
		if !re.MatchString(id) {
			t.Fatalf("id %q, want m- and 12 lower-case base32 characters", id)
		}
		if err := mtls.ValidateMachineID(id); err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("id %q drawn twice", id)
		}
		seen[id] = true
	}
}
