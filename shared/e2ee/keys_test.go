package e2ee

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config", "betcode")
	path := filepath.Join(dir, "machine.key")
	k, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Private) != KeyLen || len(k.Public) != KeyLen {
		t.Fatalf("key pair of %d and %d bytes", len(k.Private), len(k.Public))
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v, %v; want %04o", p, fi.Mode().Perm(), err, want)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the key directory holds %d files, want only the key (no temporary file left)", len(entries))
	}
	again, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Private, k.Private) || !bytes.Equal(again.Public, k.Public) {
		t.Error("reloading gave another key")
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "-----BEGIN BETCODE X25519 PRIVATE KEY-----\n") {
		t.Errorf("key file:\n%s", data)
	}
}

func TestLoadOrCreateKeyRefuses(t *testing.T) {
	good := pem.EncodeToMemory(&pem.Block{Type: keyPEMType, Bytes: bytes.Repeat([]byte{9}, 32)})
	for _, tc := range []struct {
		name string
		data []byte
		mode os.FileMode
		want string
	}{
		{"readable by others", good, 0o644, "has mode 0644: group or others may access the private key; run chmod 600"},
		{"writable by group", good, 0o620, "has mode 0620"},
		{"garbage", []byte("not a key at all\n"), 0o600, "no PEM block"},
		{"empty", nil, 0o600, "no PEM block"},
		{"another PEM type", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: make([]byte, 32)}), 0o600, `holds a "PRIVATE KEY" PEM block`},
		{"wrong size", pem.EncodeToMemory(&pem.Block{Type: keyPEMType, Bytes: make([]byte, 31)}), 0o600, "key is 31 bytes, not 32"},
		{"headers", pem.EncodeToMemory(&pem.Block{Type: keyPEMType, Headers: map[string]string{"a": "b"}, Bytes: make([]byte, 32)}), 0o600, "has headers"},
		{"more after the block", append(append([]byte(nil), good...), good...), 0o600, "more after its PEM block"},
		{"huge", bytes.Repeat([]byte("x"), maxKeyFile+1), 0o600, "over 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if runtime.GOOS == "windows" && tc.mode != 0o600 {
				t.Skip("no permission bits on Windows")
			}
			path := filepath.Join(t.TempDir(), "machine.key")
			if err := os.WriteFile(path, tc.data, tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode) // past the umask
			_, err := LoadOrCreateKey(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("LoadOrCreateKey: %v, want an error naming the file and saying %q", err, tc.want)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, tc.data) {
				t.Error("LoadOrCreateKey changed a file it refused")
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := LoadOrCreateKey(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadOrCreateKey(a directory): %v", err)
		}
	})
}

func TestFingerprint(t *testing.T) {
	pub := bytes.Repeat([]byte{1}, 32)
	sum := sha256.Sum256(pub)
	hexSum := hex.EncodeToString(sum[:])
	fp := Fingerprint(pub)
	if !regexp.MustCompile(`^[0-9a-f]{4}( [0-9a-f]{4}){15}$`).MatchString(fp) {
		t.Errorf("Fingerprint = %q, want 16 groups of 4 hex digits", fp)
	}
	if strings.ReplaceAll(fp, " ", "") != hexSum {
		t.Errorf("Fingerprint = %q, not the SHA-256 %s", fp, hexSum)
	}
	if id := FingerprintID(pub); id != hexSum[:16] {
		t.Errorf("FingerprintID = %q, want %q", id, hexSum[:16])
	}
	if s := (Addr{Role: RoleDevice, Fingerprint: fp}).String(); s != "e2ee:device:"+hexSum[:16] {
		t.Errorf("Addr.String() = %q", s)
	}
	for _, s := range []string{fp, hexSum, strings.ToUpper(fp), " " + fp + "\n"} {
		got, err := ParseFingerprint(s)
		if err != nil || !bytes.Equal(got, sum[:]) {
			t.Errorf("ParseFingerprint(%q) = %x, %v", s, got, err)
		}
		if !MatchesFingerprint(pub, s) {
			t.Errorf("MatchesFingerprint(pub, %q) = false", s)
		}
	}
	for _, s := range []string{"", fp[:78], fp + " 00", "g" + hexSum[1:], hexSum[:62] + ":0"} {
		if _, err := ParseFingerprint(s); err == nil {
			t.Errorf("ParseFingerprint(%q) succeeded", s)
		}
	}
	if MatchesFingerprint(bytes.Repeat([]byte{2}, 32), fp) || MatchesFingerprint(pub, "nonsense") {
		t.Error("MatchesFingerprint matched another key or a malformed fingerprint")
	}
}
