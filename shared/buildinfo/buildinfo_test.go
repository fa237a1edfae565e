package buildinfo

import "testing"

func TestVersion(t *testing.T) {
	for _, tt := range []struct{ stamped, want string }{
		{"v0.2.0", "v0.2.0"},
		{" v0.1.0-5-g94915d9-dirty\n", "v0.1.0-5-g94915d9-dirty"},
		// A test binary's main module has version "(devel)" or none.
		{"", Dev},
	} {
		if got := Version(tt.stamped); got != tt.want {
			t.Errorf("Version(%q) = %q, want %q", tt.stamped, got, tt.want)
		}
	}
}
