package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestGitTimeout: a git that hangs (and leaves a child holding its
// output) is killed, group and all, at the timeout.
func TestGitTimeout(t *testing.T) {
	dir := newRepo(t)
	hang := filepath.Join(t.TempDir(), "git")
	writeFile(t, hang, "#!/bin/sh\nsleep 30 &\nwait\n")
	if err := os.Chmod(hang, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Git: hang, GitTimeout: 200 * time.Millisecond, Logger: testLogger(t)})
	start := time.Now()
	_, err := s.GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: dir})
	wantStatus(t, err, codes.DeadlineExceeded, "")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}
