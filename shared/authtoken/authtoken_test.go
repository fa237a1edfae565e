package authtoken

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// Tokens minted before the checksum moved off math/big still parse.
func TestOlderTokensParse(t *testing.T) {
	for _, tt := range []struct {
		k   Kind
		tok string
	}{
		{Client, "bct_xEYDrEsm7FMuBbOSL0gK1MBzpuo2HYaMV2HG2OBb85i1LDk2o"},
		{Client, "bct_N2lMZ2LX7mvfsN3krVUpjQgcYfsDGZ2NiQCFOYHFAbY15NCoY"},
		{Join, "bcj_hqfZwgwbPeNhtzzOnRG8mY7UUE5zQlIXwYy0LlEXSf43pjroL"},
	} {
		if _, err := Parse(tt.k, tt.tok); err != nil {
			t.Errorf("Parse(%q): %v", tt.tok, err)
		}
	}
}

// The checksum's base62 digits are the big-number encoding's, for every
// 32-bit value (the edges, and a sample between).
func TestChecksumDigitsMatchBigEncoding(t *testing.T) {
	values := []uint32{0, 1, 61, 62, 62 * 62, math.MaxUint32 - 1, math.MaxUint32}
	for range 10000 {
		values = append(values, rand.Uint32())
	}
	for _, v := range values {
		want := encode(new(big.Int).SetUint64(uint64(v)), checksumLen)
		if got := base62Checksum(v); got != want {
			t.Fatalf("base62Checksum(%d) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	tok, err := New(Client)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Parse(Client, tok); err != nil {
			b.Fatal(err)
		}
	}
}

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
