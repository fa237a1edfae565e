// Package localtoken guards the agent's TCP listeners with a local token.
//
// A Unix socket is protected by its file mode (0600: only its owner can
// connect), but any local user can connect to a TCP port, loopback or not.
// So the daemon keeps a random token in <data-dir>/local-token (mode 0600,
// made at first start and reused after) and Guard admits a call on TCP only
// when it carries "authorization: Bearer <token>". The betcode CLI, run by
// the same user, reads the file. Calls that need no token are told apart by
// the type of their connection, never by anything the caller sends: Unix
// sockets, the relay tunnel (the relay authenticated the caller) and TLS
// connections whose handshake verified a client certificate.
package localtoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// FileName is the token file's name in the agent's data directory.
const FileName = "local-token"

// tokenBytes is the token's entropy; it is written as lowercase hex.
const tokenBytes = 32

// Path returns the token file of the agent whose data directory is dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// LoadOrCreate returns the token in dataDir, making one (and dataDir, mode
// 0700) if there is none. A token file that others may read is refused:
// the token may have leaked, and deleting the file makes a new one.
func LoadOrCreate(dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir %q: %w", dataDir, err)
	}
	tok, err := Read(dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make local token: %w", err)
	}
	tok = hex.EncodeToString(b[:])
	if err := atomicfile.Create(Path(dataDir), []byte(tok+"\n"), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another agent on this data dir made one first.
			return Read(dataDir)
		}
		return "", fmt.Errorf("save local token: %w", err)
	}
	return tok, nil
}

// Read returns the token in dataDir; the error wraps fs.ErrNotExist when
// there is none. Errors never contain the token.
func Read(dataDir string) (string, error) {
	p := Path(dataDir)
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("read local token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read local token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("local token %s is readable by others (mode %04o): delete it and restart the agent to make a new one", p, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4*tokenBytes))
	if err != nil {
		return "", fmt.Errorf("read local token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(tok); err != nil || len(tok) != 2*tokenBytes {
		return "", fmt.Errorf("local token %s is malformed: delete it and restart the agent to make a new one", p)
	}
	return tok, nil
}
