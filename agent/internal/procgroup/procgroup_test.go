//go:build unix

package procgroup

import (
	"bufio"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestSignalEndsTheGroup starts a shell that starts a grandchild, signals
// the group, and checks the grandchild is gone too: both hold the stdout
// pipe, so it ends (EOF) only when neither is left.
func TestSignalEndsTheGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & echo started; wait")
	cmd.SysProcAttr = Attr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if line, err := r.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("the shell said %q: %v", line, err)
	}
	if err := Signal(cmd.Process, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		eof <- err
	}()
	select {
	case err := <-eof:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the grandchild outlived its group's SIGKILL: the pipe it holds stayed open")
	}
	_ = cmd.Wait()
}
