package subagent

import "testing"

func TestWorktreeBranch(t *testing.T) {
	const id = "1a2b3c4d-5e6f-4711-8899-aabbccddeeff"
	tests := []struct{ name, want string }{
		{"tests", "subagent/tests-1a2b3c4d"},
		{"Fix the Parser!", "subagent/fix-the-parser-1a2b3c4d"},
		{"../../etc", "subagent/etc-1a2b3c4d"},
		{"a..b.lock", "subagent/a.b-1a2b3c4d"},
		{"", "subagent/subagent-1a2b3c4d"},
		{"日本語", "subagent/subagent-1a2b3c4d"},
		{".hidden-", "subagent/hidden-1a2b3c4d"},
		{"x/y z", "subagent/x-y-z-1a2b3c4d"},
		{"averyveryveryveryveryveryverylongnamethatgoesonandon", "subagent/averyveryveryveryveryveryverylongnametha-1a2b3c4d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := worktreeBranch(tt.name, id); got != tt.want {
				t.Fatalf("worktreeBranch(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}
