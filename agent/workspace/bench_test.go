package workspace

import (
	"fmt"
	"path/filepath"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// BenchmarkGetChanges is the changes view of a work tree with 500 changed
// files: 400 modified (half of them staged) and 100 untracked.
func BenchmarkGetChanges(b *testing.B) {
	dir := newRepo(b)
	for i := range 400 {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("pkg%02d/file%03d.go", i%20, i)), lines(50, "original"))
	}
	git(b, dir, "add", "-A")
	git(b, dir, "commit", "-q", "-m", "base")
	for i := range 400 {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("pkg%02d/file%03d.go", i%20, i)), lines(50, "original")+lines(5, "added"))
		if i%2 == 0 {
			git(b, dir, "add", fmt.Sprintf("pkg%02d/file%03d.go", i%20, i))
		}
	}
	for i := range 100 {
		writeFile(b, filepath.Join(dir, fmt.Sprintf("new/file%03d.go", i)), lines(30, "new"))
	}
	s := newService(b, b.TempDir(), nil)
	req := &pb.GetChangesRequest{WorkingDirectory: dir}
	b.Run("service", func(b *testing.B) {
		for b.Loop() {
			resp, err := s.GetChanges(b.Context(), req)
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.Files) != 500 {
				b.Fatalf("%d files", len(resp.Files))
			}
		}
	})
	// The floor: the two git commands alone, one after the other.
	b.Run("git-alone", func(b *testing.B) {
		for b.Loop() {
			for _, args := range [][]string{statusArgs(), {"diff", "--numstat", "-z", "HEAD"}} {
				if _, _, err := s.git.run(b.Context(), dir, 0, nil, args...); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
