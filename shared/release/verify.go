package release

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Principal and Namespace are the signer's identity and the signature's
// namespace in `ssh-keygen -Y sign|verify`: a signature made for another
// purpose (git commits, files) with the same key does not verify as a
// release.
const (
	Principal = "release@betcode.dev"
	Namespace = "betcode-release"
)

// AllowedSigners is the project's release key in ssh-keygen's
// allowed_signers format (shared/release/allowed_signers).
//
//go:embed allowed_signers
var AllowedSigners []byte

// ErrBadSignature is returned when checksums.txt's signature does not
// verify with the allowed signers.
var ErrBadSignature = errors.New("the signature of checksums.txt does not verify with the release key")

// Verify checks sig, an SSH signature of checksums (the bytes of
// checksums.txt), with `ssh-keygen -Y verify` against allowedSigners (the
// contents of an allowed_signers file).
func Verify(ctx context.Context, checksums, sig, allowedSigners []byte) error {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		return fmt.Errorf("ssh-keygen checks the release's signature and is missing: install OpenSSH's client (apt-get install openssh-client): %w", err)
	}
	dir, err := os.MkdirTemp("", "betcode-verify-")
	if err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	defer os.RemoveAll(dir)
	signers, sigFile := filepath.Join(dir, "allowed_signers"), filepath.Join(dir, "checksums.txt.sig")
	if err := os.WriteFile(signers, allowedSigners, 0o600); err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	if err := os.WriteFile(sigFile, sig, 0o600); err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	cmd := exec.CommandContext(ctx, keygen, "-Y", "verify", "-f", signers, "-I", Principal, "-n", Namespace, "-s", sigFile)
	cmd.Stdin = bytes.NewReader(checksums)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("verify signature: %w", ctx.Err())
		}
		return fmt.Errorf("%w (ssh-keygen: %s)", ErrBadSignature, strings.TrimSpace(string(out)))
	}
	return nil
}

// VerifyDir checks a release directory as make verify-release does: the
// signature of checksums.txt with allowedSigners, every file it lists
// against its SHA-256, and an SBOM for every archive. It returns the
// number of archives.
func VerifyDir(ctx context.Context, dir string, allowedSigners []byte) (int, error) {
	sums, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		return 0, fmt.Errorf("read the release's checksums: %w", err)
	}
	sig, err := os.ReadFile(filepath.Join(dir, "checksums.txt.sig"))
	if err != nil {
		return 0, fmt.Errorf("read the release's signature: %w", err)
	}
	if err := Verify(ctx, sums, sig, allowedSigners); err != nil {
		return 0, err
	}
	c, err := ParseChecksums(sums)
	if err != nil {
		return 0, err
	}
	archives := 0
	var errs []error
	for name := range c {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is in checksums.txt but missing: %w", name, err))
			continue
		}
		if err := c.Check(name, data); err != nil {
			errs = append(errs, err)
		}
		if strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".zip") {
			archives++
			if _, ok := c[name+".cdx.json"]; !ok {
				errs = append(errs, fmt.Errorf("%s has no SBOM (%s.cdx.json) in checksums.txt", name, name))
			}
		}
	}
	if archives == 0 {
		errs = append(errs, errors.New("checksums.txt lists no archive"))
	}
	return archives, errors.Join(errs...)
}

// Sign writes file+".sig", the SSH signature of file made with the private
// key at keyFile (`ssh-keygen -Y sign -n betcode-release`).
func Sign(ctx context.Context, keyFile, file string) error {
	_ = os.Remove(file + ".sig") // ssh-keygen refuses to overwrite it
	out, err := exec.CommandContext(ctx, "ssh-keygen", "-Y", "sign", "-f", keyFile, "-n", Namespace, file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sign %s with %s: %w: %s", filepath.Base(file), keyFile, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DevKey makes a throwaway Ed25519 key pair at path (and path+".pub") and
// returns the allowed_signers line that trusts it.
func DevKey(ctx context.Context, path string) ([]byte, error) {
	_ = os.Remove(path)
	_ = os.Remove(path + ".pub")
	out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "betcode development release key", "-f", path).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("make a development signing key: %w: %s", err, strings.TrimSpace(string(out)))
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		return nil, fmt.Errorf("read the development key: %w", err)
	}
	return SignersLine(pub)
}

// SignersLine turns an OpenSSH public key ("ssh-ed25519 AAAA… comment") into
// the allowed_signers line that trusts it for releases.
func SignersLine(pub []byte) ([]byte, error) {
	f := strings.Fields(string(pub))
	if len(f) < 2 || f[0] != "ssh-ed25519" {
		return nil, fmt.Errorf("release signing key: want an ssh-ed25519 public key, got %.40q", pub)
	}
	return fmt.Appendf(nil, "%s namespaces=%q %s %s\n", Principal, Namespace, f[0], f[1]), nil
}
