package authtoken

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestNewParse(t *testing.T) {
	for _, k := range []Kind{Client, Join} {
		seen := map[string]bool{}
		for range 100 {
			tok, err := New(k)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) != Len || !strings.HasPrefix(tok, string(k)+"_") {
				t.Fatalf("token %q: want %d characters with prefix %s_", tok, Len, k)
			}
			if seen[tok] {
				t.Fatalf("token %q twice", tok)
			}
			seen[tok] = true
			h, err := Parse(k, tok)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tok, err)
			}
			if !bytes.Equal(h, Hash(tok)) || len(ID(h)) != 12 {
				t.Fatalf("hash/id of %q wrong", tok)
			}
		}
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := New(Client)
	join, _ := New(Join)
	flip := []byte(good)
	if flip[10] == 'a' {
		flip[10] = 'b'
	} else {
		flip[10] = 'a'
	}
	tests := []struct {
		name, tok, want string
	}{
		{"empty", "", "starts with"},
		{"join as client", join, "this is a join token"},
		{"short", good[:Len-1], "was it cut short"},
		{"long", good + "x", "want 53"},
		{"bad character", good[:20] + "-" + good[21:], "unexpected character at position 21"},
		{"typo", string(flip), "checksum"},
		{"other prefix", "ghp_" + good[4:], "starts with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(Client, tt.tok)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want ErrMalformed mentioning %q", tt.tok, err, tt.want)
			}
			if strings.Contains(err.Error(), tt.tok) && tt.tok != "" {
				t.Fatalf("error %q repeats the token", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	good, _ := New(Client)
	f.Add(good)
	f.Add("bct_")
	f.Add("bcj_0000000000000000000000000000000000000000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Parse(Client, s)
		if err == nil {
			if len(s) != Len || !bytes.Equal(h, Hash(s)) {
				t.Fatalf("accepted %q", s)
			}
			return
		}
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
	})
}
