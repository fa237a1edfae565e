package release

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteArchiveIsReproducible(t *testing.T) {
	files := []File{{Name: "b", Mode: 0o755, Data: []byte("second")}, {Name: "a", Mode: 0o644, Data: []byte("first")}}
	for _, goos := range []string{"linux", "windows"} {
		t.Run(goos, func(t *testing.T) {
			var x, y bytes.Buffer
			if err := WriteArchive(&x, goos, files, time.Unix(1796000000, 0)); err != nil {
				t.Fatal(err)
			}
			// Another order and another zone of the same instant: same bytes.
			rev := []File{files[1], files[0]}
			if err := WriteArchive(&y, goos, rev, time.Unix(1796000000, 0).In(time.FixedZone("x", 3600))); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.Bytes(), y.Bytes()) {
				t.Fatal("two archives of the same files differ")
			}
			name := ArchiveName("betcode", "v1.0.0", goos, "amd64")
			for _, f := range files {
				got, err := ExtractFile(name, x.Bytes(), f.Name)
				if err != nil || string(got) != string(f.Data) {
					t.Errorf("ExtractFile(%s) = %q, %v; want %q", f.Name, got, err, f.Data)
				}
			}
			if _, err := ExtractFile(name, x.Bytes(), "missing"); err == nil {
				t.Error("ExtractFile found a file the archive does not hold")
			}
		})
	}
}

func TestChecksums(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"sha256sum format", sum + "  betcode_v1.0.0_linux_amd64.tar.gz\n", true},
		{"one space", sum + " betcode_v1.0.0_linux_amd64.tar.gz\n", false},
		{"short sum", "abcd  x\n", false},
		{"a path", sum + "  ../x\n", false},
		{"not hex", strings.Repeat("zz", 32) + "  x\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseChecksums([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseChecksums: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && string(c.Format()) != tc.in {
				t.Errorf("Format = %q, want %q", c.Format(), tc.in)
			}
		})
	}
	c := Checksums{
		"betcode-agent_v1.2.3_linux_amd64.tar.gz": sum, "betcode-agent_v1.2.3_linux_amd64.tar.gz.cdx.json": sum,
		"betcode_v1.2.3_linux_amd64.tar.gz": sum, "betcode_v1.2.3_windows_amd64.zip": sum,
	}
	for _, tc := range []struct{ bin, goos, want, version string }{
		{"betcode-agent", "linux", "betcode-agent_v1.2.3_linux_amd64.tar.gz", "v1.2.3"},
		{"betcode", "linux", "betcode_v1.2.3_linux_amd64.tar.gz", "v1.2.3"},
		{"betcode", "windows", "betcode_v1.2.3_windows_amd64.zip", "v1.2.3"},
		{"betcode-agent", "darwin", "", ""},
	} {
		name, v, err := c.Archive(tc.bin, tc.goos, "amd64")
		if name != tc.want || v != tc.version || (err == nil) != (tc.want != "") {
			t.Errorf("Archive(%s, %s) = %q, %q, %v; want %q, %q", tc.bin, tc.goos, name, v, err, tc.want, tc.version)
		}
	}
}

func TestSignAndVerify(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	line, err := DevKey(ctx, filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := DevKey(ctx, filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(dir, "checksums.txt")
	data := []byte(strings.Repeat("ab", 32) + "  x.tar.gz\n")
	os.WriteFile(sums, data, 0o644)
	if err := Sign(ctx, filepath.Join(dir, "key"), sums); err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile(sums + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		data, signers []byte
		ok            bool
	}{
		{"good", data, line, true},
		{"changed checksums", append([]byte("x"), data...), line, false},
		{"another key", data, other, false},
		{"the project's key", data, AllowedSigners, false},
		{"another namespace", data, bytes.Replace(line, []byte(Namespace), []byte("git"), 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(ctx, tc.data, sig, tc.signers)
			if (err == nil) != tc.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "does not verify") {
				t.Errorf("error %q does not say the signature does not verify", err)
			}
		})
	}
}

func TestReplaceKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "betcode-agent")
	os.WriteFile(exe, []byte("old"), 0o755)
	os.WriteFile(exe+PreviousSuffix, []byte("older"), 0o755)
	if err := Replace(exe, []byte("new")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{exe: "new", exe + PreviousSuffix: "old"} {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", filepath.Base(path), b, err, want)
		}
	}
	if fi, _ := os.Stat(exe); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("Replace left files behind: %v", ents)
	}
	if err := Replace(filepath.Join(dir, "missing"), []byte("x")); err == nil {
		t.Error("Replace of a missing binary succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("a failed Replace left files behind: %v", ents)
	}
}

func TestPortableSBOM(t *testing.T) {
	in := `{"bomFormat":"CycloneDX","specVersion":"1.6","version":1,"metadata":{"tools":[{"name":"cyclonedx-gomod","version":"v1.10.0","hashes":[{"alg":"SHA-256","content":"ab"}]}]},"components":[{"name":"x","version":"v1.0.0"}]}`
	out, err := portableSBOM([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hashes") || !strings.Contains(string(out), `"version": "v1.10.0"`) || !strings.Contains(string(out), `"version": 1`) {
		t.Errorf("portableSBOM kept the tool's hashes or lost data:\n%s", out)
	}
	if _, err := portableSBOM([]byte(`{"bomFormat":"SPDX"}`)); err == nil {
		t.Error("a non-CycloneDX document was accepted")
	}
}
