package eventlog

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// crashChildEnv, when set to a database path, turns TestCrashRecovery into
// the child half: append, flush, report, then keep appending until killed.
const crashChildEnv = "EVENTLOG_CRASH_CHILD"

const crashFlushed = 2000

// TestCrashRecovery re-executes the test binary as a child that appends and
// flushes events and is then killed with SIGKILL before Close. Every event
// the child saw flushed must be there after reopening, and the log must be a
// gap-free prefix (batches are atomic). Each event carries a key/value entry
// (as a message carries its idempotency key) and a session status (as a
// turn's start and end do): every event recovered has its entry, no entry
// outlives its event, and the session's status is the last recovered
// event's.
func TestCrashRecovery(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "events.db")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashRecovery$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints "flushed N" once N events are committed.
	var flushed uint64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "flushed "); ok {
			if flushed, err = strconv.ParseUint(n, 10, 64); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if flushed == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child never reported a flush (scan err %v)", sc.Err())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait() // reports "signal: killed"

	l := openAt(t, path, Options{})
	last, err := l.LastSeq(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if last < flushed {
		t.Fatalf("after crash LastSeq = %d, want >= %d (flushed before the kill)", last, flushed)
	}
	want := uint64(1)
	err = l.Since(t.Context(), "s", 0, func(e Event) error {
		if e.Seq != want || string(e.Payload) != fmt.Sprintf("s-%d", e.Seq) {
			return fmt.Errorf("event %d (%q), want seq %d", e.Seq, e.Payload, want)
		}
		want++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want-1 != last {
		t.Fatalf("read %d events, LastSeq %d", want-1, last)
	}
	kv, err := l.GetKV(t.Context(), "s", "idem/")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= last; seq++ {
		if _, ok := kv[crashKey(seq)]; !ok {
			t.Errorf("event %d survived the crash without its key/value entry", seq)
		}
	}
	if n := uint64(len(kv)); n != last {
		t.Errorf("%d key/value entries survived for %d events", n, last)
	}
	meta, err := l.GetSession(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := crashStatus(last); meta.Status != want {
		t.Errorf("after the crash the session is %q, want %q (the status of its last event, %d)", meta.Status, want, last)
	}
	t.Logf("flushed %d before SIGKILL, recovered %d", flushed, last)
	// The log accepts the next event after the crash.
	appendAll(t, l, ev("s", last+1, "k"))
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// crashChild is the child process: it never returns normally.
func crashChild(path string) {
	ctx := context.Background()
	l, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	if err := l.PutSession(ctx, Session{ID: "s", Status: "new"}); err != nil {
		fmt.Fprintln(os.Stderr, "child: put session:", err)
		os.Exit(2)
	}
	for i := uint64(1); i <= crashFlushed; i++ {
		if err := l.Append(ctx, keyed(i)); err != nil {
			fmt.Fprintln(os.Stderr, "child: append:", err)
			os.Exit(2)
		}
	}
	if err := l.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: flush:", err)
		os.Exit(2)
	}
	fmt.Printf("flushed %d\n", crashFlushed)
	// Keep writing (some of this is committed, some queued) until killed,
	// so the kill lands mid-stream.
	for i := uint64(crashFlushed + 1); ; i++ {
		if err := l.Append(ctx, keyed(i)); err != nil {
			fmt.Fprintln(os.Stderr, "child: append:", err)
			os.Exit(2)
		}
	}
}

// crashKey is the key of the key/value entry written with event seq.
func crashKey(seq uint64) string { return fmt.Sprintf("idem/%08d", seq) }

// crashStatus is the session status written with event seq.
func crashStatus(seq uint64) string { return fmt.Sprintf("status-%d", seq) }

// keyed is the child's event seq with its key/value entry and status.
func keyed(seq uint64) Event {
	e := ev("s", seq, "k")
	e.With = &KV{Key: crashKey(seq), Value: []byte("v")}
	e.Status = crashStatus(seq)
	return e
}
