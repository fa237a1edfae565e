package worktree

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// benchFiles is the size of the benchmark's repository.
const benchFiles = 10_000

// benchSeq numbers the benchmark's branches: sub-benchmarks run more than
// once on the same repository.
var benchSeq atomic.Int64

// bigRepo makes a repository of n files (100 directories, ~200 bytes
// each) with one commit on main, checked out, using git fast-import.
func bigRepo(b *testing.B, n int) string {
	b.Helper()
	requireGit(b)
	dir := filepath.Join(canonical(b.TempDir()), "big")
	run(b, filepath.Dir(dir), "init", "-q", dir)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = gitEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	for i := 1; i <= n; i++ {
		content := fmt.Sprintf("package p%d\n\n// File %d of the benchmark repository, padded to a typical source size.\nconst Value%d = %d\n", i%100, i, i, i*7)
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n%s\n", i, len(content), content)
	}
	msg := "10k files\n"
	fmt.Fprintf(w, "commit refs/heads/main\nmark :%d\ncommitter t <t@example.com> 1700000000 +0000\ndata %d\n%s", n+1, len(msg), msg)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "M 100644 :%d dir%02d/file%05d.go\n", i, i%100, i)
	}
	fmt.Fprint(w, "\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v", err)
	}
	run(b, dir, "checkout", "-q", "-f", "main")
	syscall.Sync() // measure on a repository at rest, not its creation's writeback
	return dir
}

// fakeCLI builds internal/fakeclaude into dir.
func fakeCLI(b *testing.B, dir string) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(dir, "fakeclaude")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/fakeclaude")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build fakeclaude: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkCreateWorktreeAndStartSession measures CreateWorktree (a new
// branch, checked out: 10,000 files) plus StartSession in it by worktree
// id with a first message, which returns once the CLI runs and has the
// message. The CLI is the fake one (internal/fakeclaude): the real CLI's
// own start-up (~1 s of Node.js) is not BetCode's to measure here. The
// medians are reported as create-ms, start-ms and total-ms; git-alone is
// the floor, `git worktree add` of the same repository by itself. Each
// worktree stays until the end (a removal's 10,000 deletions would slow
// the next checkout down with their writeback), and each iteration starts
// after a sync.
//
//	go test -run '^$' -bench CreateWorktreeAndStartSession -benchtime 10x ./worktree/
func BenchmarkCreateWorktreeAndStartSession(b *testing.B) {
	ctx := context.Background()
	repo := bigRepo(b, benchFiles)
	dir := b.TempDir()
	mgr, err := session.Open(ctx, session.Config{ClaudeBin: fakeCLI(b, dir), DefaultDir: dir}, filepath.Join(dir, "agent.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close(ctx)
	svc := New(Options{Store: mgr.Log(), Sessions: ManagerSessions{M: mgr}})
	mgr.SetWorktrees(svc)

	b.Run("service", func(b *testing.B) { benchService(b, ctx, repo, svc, mgr) })
	// The floor: the same checkout by git alone, nothing else.
	b.Run("git-alone", func(b *testing.B) {
		syscall.Sync() // after the service's worktrees were removed
		var adds []time.Duration
		for b.Loop() {
			i := benchSeq.Add(1)
			path := fmt.Sprintf("%s-alone-%d", repo, i)
			t0 := time.Now()
			run(b, repo, "worktree", "add", "--quiet", "-b", fmt.Sprintf("alone-%d", i), path)
			adds = append(adds, time.Since(t0))
			b.StopTimer()
			b.Cleanup(func() { run(b, repo, "worktree", "remove", "--force", path) })
			syscall.Sync()
			b.StartTimer()
		}
		b.ReportMetric(ms(median(adds)), "create-ms")
	})
}

func benchService(b *testing.B, ctx context.Context, repo string, svc *Service, mgr *session.Manager) {
	var creates, starts, totals []time.Duration
	for b.Loop() {
		i := benchSeq.Add(1)
		t0 := time.Now()
		wt, err := svc.CreateWorktree(ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: fmt.Sprintf("bench-%d", i), CreateBranch: true})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, _, err := mgr.Start(ctx, session.StartRequest{CreateRequest: session.CreateRequest{WorktreeID: wt.Id}, Text: "hello"})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		creates, starts, totals = append(creates, t1.Sub(t0)), append(starts, t2.Sub(t1)), append(totals, t2.Sub(t0))

		b.StopTimer()
		if _, err := mgr.Delete(ctx, s.ID()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_, _ = svc.RemoveWorktree(ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id, Force: true})
		})
		syscall.Sync() // the next checkout does not wait for this one's writeback
		b.StartTimer()
	}
	b.ReportMetric(ms(median(creates)), "create-ms")
	b.ReportMetric(ms(median(starts)), "start-ms")
	b.ReportMetric(ms(median(totals)), "total-ms")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
