//go:build unix

package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalEndsTheGroup starts a shell that starts a grandchild, signals
// the group, and checks the grandchild is gone too.
func TestSignalEndsTheGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = Attr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", buf[:n], err)
	}
	if err := Signal(cmd.Process, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Signal 0 only checks the process exists; a zombie is reaped by init.
		err := syscall.Kill(grandchild, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(grandchild) + "/stat"); strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grandchild %d outlived its group's SIGKILL", grandchild)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
