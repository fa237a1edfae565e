package buildinfo

import "testing"

func TestParseAndIsDev(t *testing.T) {
	for _, tt := range []struct {
		in     string
		want   Semver
		parsed bool
		dev    bool
	}{
		{"v0.1.0", Semver{0, 1, 0}, true, false},
		{"0.2.0", Semver{0, 2, 0}, true, false},
		{"1.2", Semver{1, 2, 0}, true, false},
		{"v0.2.0-rc.1", Semver{0, 2, 0}, true, false},
		{"0.2.0-dev", Semver{0, 2, 0}, true, true},
		{"v0.2.0-dev+669d2cc-dirty", Semver{0, 2, 0}, true, true},
		{"v0.1.0-5-g669d2cc", Semver{0, 1, 0}, true, true},
		{"v0.1.0-5-g669d2cc-dirty", Semver{0, 1, 0}, true, true},
		{"v0.2.1-0.20261206020000-669d2cc12345", Semver{0, 2, 1}, true, true},
		{"v0.0.0-20261206020000-669d2cc12345", Semver{0, 0, 0}, true, true},
		{"v0.2.0-rc.1.0.20261206020000-669d2cc12345", Semver{0, 2, 0}, true, true},
		{"dev", Semver{}, false, true},
		{"(devel)", Semver{}, false, true},
		{"669d2cc", Semver{}, false, true},
		{"669d2cc-dirty", Semver{}, false, true},
		{"", Semver{}, false, false},
		{"banana", Semver{}, false, false},
		{"1.2.3.4", Semver{}, false, false},
		{"1.2.3+abc", Semver{1, 2, 3}, true, false},
		{"1.-2.3", Semver{}, false, false},
	} {
		got, ok := Parse(tt.in)
		if got != tt.want || ok != tt.parsed {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.parsed)
		}
		if dev := IsDev(tt.in); dev != tt.dev {
			t.Errorf("IsDev(%q) = %v, want %v", tt.in, dev, tt.dev)
		}
	}
	if !(Semver{0, 1, 9}).Less(Semver{0, 2, 0}) || (Semver{0, 2, 0}).Less(Semver{0, 2, 0}) {
		t.Error("Less is wrong")
	}
}
