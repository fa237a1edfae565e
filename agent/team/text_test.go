package team

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHead(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"cut", "abcdef", 5, "abcde"},
		{"at a rune boundary", "ab\u00e9", 3, "ab"}, // é is 2 bytes
		{"empty", "", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := head(tt.in, tt.n); got != tt.want {
				t.Fatalf("head(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"short", []string{"a", "b"}, "ab"},
		{"keeps the last MaxText bytes", []string{strings.Repeat("x", MaxText), "end"}, strings.Repeat("x", MaxText-3) + "end"},
		{"many writes", slicesRepeat("0123456789", 1229), lastN(strings.Repeat("0123456789", 1229), MaxText)},
		{"from a character start", []string{"\u00e9" + strings.Repeat("é", MaxText/2)}, strings.Repeat("é", MaxText/2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl tail
			for _, w := range tt.writes {
				tl.write(w)
			}
			got := tl.String()
			if got != tt.want {
				t.Fatalf("tail = %q (%d bytes), want %d bytes", clip(got), len(got), len(tt.want))
			}
			if len(got) > MaxText || !utf8.ValidString(got) {
				t.Fatalf("tail is %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
		})
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func lastN(s string, n int) string { return s[len(s)-n:] }

func clip(s string) string { return head(s, 40) }
