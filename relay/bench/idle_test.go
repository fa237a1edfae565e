package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/betcode-dev/betcode/relay/internal/tunnelfleet"
)

// tunnelCounts reads BETCODE_BENCH_TUNNELS ("1000,2000,5000,10000").
func tunnelCounts() []int {
	s := os.Getenv("BETCODE_BENCH_TUNNELS")
	if s == "" {
		s = "1000,5000"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// connectAgents connects one simulated agent per config, par at a time,
// and returns them with the wall time it took.
func connectAgents(tb testing.TB, addr string, cfgs []*tls.Config, par int) ([]*agentLink, time.Duration) {
	tb.Helper()
	links, took, err := dialAgents(addr, cfgs, par)
	if err != nil {
		tb.Fatal(err)
	}
	return links, took
}

func dialAgents(addr string, cfgs []*tls.Config, par int) ([]*agentLink, time.Duration, error) {
	links := make([]*agentLink, len(cfgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	for range par {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cfgs) || failed.Load() != nil {
					return
				}
				l, err := dialAgent(context.Background(), addr, cfgs[i], nil)
				if err != nil {
					err = fmt.Errorf("agent %d: %w", i, err)
					failed.Store(&err)
					return
				}
				links[i] = l
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		closeAgents(links)
		return nil, 0, *p
	}
	return links, time.Since(start), nil
}

func closeAgents(links []*agentLink) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := i; j < len(links); j += 16 {
				if links[j] != nil {
					links[j].close()
				}
			}
		})
	}
	wg.Wait()
}

// relaySnapshot is the relay process's memory as /proc and the Go runtime
// see it. All sizes are bytes except rssKiB.
type relaySnapshot struct {
	rssKiB                int64
	heapInuse, stackInuse float64 // spans holding heap objects; goroutine stacks
	heapAlloc             float64 // heap objects: live ones and garbage not yet swept
	liveHeap              float64 // heap marked live by the last GC (0 if unknown)
	heapFree              float64 // free heap pages not yet returned to the OS
	meta                  float64 // the runtime's own: span structs, GC metadata, profiling…
	goroutines            float64
	nextGC, gcs           float64
}

// restKiB is the part of RSS the Go runtime does not account for: the
// binary, C or mmap'd memory (SQLite's page cache), and errors of the
// estimates above.
func (s relaySnapshot) restKiB() float64 {
	return float64(s.rssKiB) - (s.heapInuse+s.stackInuse+s.heapFree+s.meta)/1024
}

// snapshot reads the relay's /metrics (its Go collector) and VmRSS.
func (r *relayProc) snapshot(tb testing.TB) relaySnapshot {
	m, err := r.metrics(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return relaySnapshot{rssKiB: r.rssKiB(), heapInuse: m["go_memstats_heap_inuse_bytes"], stackInuse: m["go_memstats_stack_inuse_bytes"],
		goroutines: m["go_goroutines"], heapAlloc: m["go_memstats_heap_alloc_bytes"],
		heapFree: m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"],
		meta: m["go_memstats_mspan_sys_bytes"] + m["go_memstats_mcache_sys_bytes"] + m["go_memstats_buck_hash_sys_bytes"] +
			m["go_memstats_gc_sys_bytes"] + m["go_memstats_other_sys_bytes"],
		nextGC: m["go_memstats_next_gc_bytes"], gcs: m["go_gc_duration_seconds_count"]}
}

// selfSnapshot is snapshot for a relay running in this process, read from
// runtime/metrics directly.
func selfSnapshot(tb testing.TB) relaySnapshot {
	names := []string{
		"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/stacks:bytes", "/gc/heap/live:bytes", "/sched/goroutines:goroutines",
		"/gc/heap/goal:bytes", "/gc/cycles/total:gc-cycles", "/memory/classes/heap/free:bytes",
		// the runtime's own, as in metadata below
		"/memory/classes/metadata/mcache/free:bytes", "/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/metadata/mspan/free:bytes", "/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/other:bytes", "/memory/classes/os-stacks:bytes",
		"/memory/classes/other:bytes", "/memory/classes/profiling/buckets:bytes",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return float64(s[i].Value.Uint64())
		}
		return 0
	}
	rss, err := procRSSKiB(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	var meta float64
	for i := 8; i < len(names); i++ {
		meta += v(i)
	}
	return relaySnapshot{rssKiB: rss, heapAlloc: v(0), heapInuse: v(0) + v(1), stackInuse: v(2), liveHeap: v(3),
		goroutines: v(4), nextGC: v(5), gcs: v(6), heapFree: v(7), meta: meta}
}

// procRSSKiB reads a process's VmRSS.
func procRSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// reportPerTunnel reports what n tunnels added between two snapshots.
func reportPerTunnel(b *testing.B, n int, before, after relaySnapshot, suffix string) {
	per := func(a, z float64) float64 { return (z - a) / float64(n) }
	b.ReportMetric(per(float64(before.rssKiB), float64(after.rssKiB)), "rss-KiB/tunnel"+suffix)
	b.ReportMetric(per(before.heapInuse, after.heapInuse)/1024, "heap-KiB/tunnel"+suffix)
	b.ReportMetric(per(before.stackInuse, after.stackInuse)/1024, "stack-KiB/tunnel"+suffix)
	if suffix == "" {
		b.ReportMetric(per(before.heapAlloc, after.heapAlloc)/1024, "heap-alloc-KiB/tunnel")
		b.ReportMetric(per(before.goroutines, after.goroutines), "goroutines/tunnel")
		b.ReportMetric(per(before.heapFree, after.heapFree)/1024, "heap-free-KiB/tunnel")
	}
	if before.liveHeap > 0 && after.liveHeap > 0 {
		b.ReportMetric(per(before.liveHeap, after.liveHeap)/1024, "live-heap-KiB/tunnel"+suffix)
	}
}

func logSnapshots(b *testing.B, n int, took time.Duration, before, after relaySnapshot) {
	b.Logf("n=%d: relay RSS %d → %d KiB, heap in use %.1f → %.1f MiB, stacks %.1f → %.1f MiB, goroutines %.0f → %.0f, connected in %s",
		n, before.rssKiB, after.rssKiB, before.heapInuse/(1<<20), after.heapInuse/(1<<20),
		before.stackInuse/(1<<20), after.stackInuse/(1<<20), before.goroutines, after.goroutines, took.Round(time.Millisecond))
	b.Logf("after: heap alloc (live + unswept garbage) %.1f MiB, next GC at %.1f MiB, %.0f GCs so far",
		after.heapAlloc/(1<<20), after.nextGC/(1<<20), after.gcs)
	perKiB := func(a, z float64) float64 { return (z - a) / 1024 / float64(n) }
	b.Logf("RSS per tunnel %.1f KiB = heap in use %.1f + stacks %.1f + free heap not yet returned to the OS %.1f + runtime metadata %.1f + the rest (non-Go, binary) %.1f",
		float64(after.rssKiB-before.rssKiB)/float64(n), perKiB(before.heapInuse, after.heapInuse), perKiB(before.stackInuse, after.stackInuse),
		perKiB(before.heapFree, after.heapFree), perKiB(before.meta, after.meta), (after.restKiB()-before.restKiB())/float64(n))
}

// BenchmarkIdleTunnels measures the relay's memory per idle tunnel: a
// fresh relay process per count, RSS before and after N simulated agents
// (each its own TLS connection and machine certificate) are connected.
// Each case does its work once, whatever b.N:
//
//	BETCODE_BENCH_TUNNELS=1000,2000,5000,10000 go test -run '^$' -bench IdleTunnels -benchtime 1x ./bench/
//
// heap-KiB is heap spans in use, heap-alloc-KiB the objects in them (live
// ones and garbage the GC has not swept yet). With BETCODE_BENCH_INPROC=1
// the relay runs in the test process and the agents in a child process
// (see idleInProcess): the case then also reports the live heap and the
// stacks after forced GCs, and writes heap and goroutine profiles of the
// relay alone (BETCODE_BENCH_MEMPROFILERATE=1 records every allocation
// instead of sampling one per 512 KiB). In that mode, run one count at a
// time: the counts share the process, so the RSS figures of the later ones
// are understated.
func BenchmarkIdleTunnels(b *testing.B) {
	if r := envInt("BETCODE_BENCH_MEMPROFILERATE", 0); r > 0 && os.Getenv("BETCODE_BENCH_INPROC") == "1" {
		runtime.MemProfileRate = r // e.g. 1 for a heap profile of every allocation
	}
	for _, n := range tunnelCounts() {
		b.Run(fmt.Sprintf("tunnels=%d", n), func(b *testing.B) {
			raiseFileLimit(b, uint64(n)+1000)
			r := newRelay(b, relayEnv()...)
			mint := newCertMint(b, r.pki)
			cfgs := mint.machines(b, "sim", n+1)
			if r.cmd == nil {
				idleInProcess(b, r, n, cfgs)
				return
			}

			// One tunnel first, so one-time costs (first handshake, store
			// statements, HTTP/2 and yamux code paths) are in the baseline.
			warm, _ := connectAgents(b, r.addr, cfgs[:1], 1)
			defer closeAgents(warm)
			time.Sleep(2 * time.Second)
			before := r.snapshot(b)

			links, took := connectAgents(b, r.addr, cfgs[1:], 16)
			r.waitConnected(n+1, time.Minute)
			time.Sleep(time.Duration(envInt("BETCODE_BENCH_SETTLE_S", 5)) * time.Second)
			after := r.snapshot(b)

			reportPerTunnel(b, n, before, after, "")
			b.ReportMetric(float64(n)/took.Seconds(), "connects/s")
			b.ReportMetric(0, "ns/op")
			logSnapshots(b, n, took, before, after)

			// Kill the relay first: it drops every tunnel at once, so the
			// agents close quickly.
			r.kill()
			closeAgents(links)
		})
	}
}

// idleInProcess is BenchmarkIdleTunnels with the relay in this process
// (BETCODE_BENCH_INPROC=1) and the n agents in a child process, so that
// this process's memory, goroutines and profiles are the relay's alone
// (plus the benchmark's small, constant share, in the baseline). Besides
// the metrics of the out-of-process case (after the same settle, no forced
// GC) it reports, suffixed:
//   - "-gc": after two forced GCs: live heap, and stacks shrunk as far as
//     two GCs shrink them;
//   - "-freed": RSS after debug.FreeOSMemory, i.e. what the relay needs
//     once free pages are returned to the OS.
//
// It writes idle-N.heap (in-use space after the GCs) and idle-N.goroutines
// (grouped stacks) to the temp dir and logs the largest goroutine groups.
func idleInProcess(b *testing.B, r *relayProc, n int, cfgs []*tls.Config) {
	certs := filepath.Join(b.TempDir(), "machines.pem")
	if err := tunnelfleet.WriteCerts(certs, cfgs[1:]); err != nil {
		b.Fatal(err)
	}
	warm, _ := connectAgents(b, r.addr, cfgs[:1], 1)
	defer closeAgents(warm)
	cfgs = nil // the minted keys are garbage now; only the files remain
	time.Sleep(2 * time.Second)
	runtime.GC()
	before := selfSnapshot(b)

	start := time.Now()
	fleet := startFleet(b, r, certs, 16)
	r.waitConnected(n+1, time.Minute)
	took := time.Since(start)
	time.Sleep(time.Duration(envInt("BETCODE_BENCH_SETTLE_S", 5)) * time.Second)
	after := selfSnapshot(b)
	runtime.GC()
	runtime.GC()
	afterGC := selfSnapshot(b)
	writeProfiles(b, n)
	debug.FreeOSMemory()
	afterFree := selfSnapshot(b)

	reportPerTunnel(b, n, before, after, "")
	reportPerTunnel(b, n, before, afterGC, "-gc")
	b.ReportMetric(float64(afterFree.rssKiB-before.rssKiB)/float64(n), "rss-KiB/tunnel-freed")
	b.ReportMetric(float64(n)/took.Seconds(), "connects/s")
	b.ReportMetric(0, "ns/op")
	logSnapshots(b, n, took, before, after)
	b.Logf("after 2 GCs: RSS %d KiB, live heap %.1f → %.1f MiB, heap in use %.1f MiB, stacks %.1f MiB; after FreeOSMemory: RSS %d KiB",
		afterGC.rssKiB, before.liveHeap/(1<<20), afterGC.liveHeap/(1<<20), afterGC.heapInuse/(1<<20), afterGC.stackInuse/(1<<20), afterFree.rssKiB)
	fleet.stop()
}

// writeProfiles writes the heap (in use, as of the last GC) and goroutine
// profiles and logs the goroutine groups that hold at least 1% of them.
func writeProfiles(b *testing.B, n int) {
	heap := filepath.Join(os.TempDir(), fmt.Sprintf("idle-%d.heap", n))
	grt := filepath.Join(os.TempDir(), fmt.Sprintf("idle-%d.goroutines", n))
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(heap, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	buf.Reset()
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(grt, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("profiles: %s (go tool pprof -sample_index=inuse_space), %s", heap, grt)
	for _, g := range goroutineGroups(buf.String()) {
		if g.count*100 >= n {
			b.Logf("%6d goroutines in %s", g.count, g.where)
		}
	}
}

type goroutineGroup struct {
	count int
	where string // the innermost frame outside the runtime, and its creator
}

// goroutineGroups summarises a debug=1 goroutine profile.
func goroutineGroups(prof string) []goroutineGroup {
	_, prof, _ = strings.Cut(prof, "\n") // "goroutine profile: total N"
	var out []goroutineGroup
	for _, rec := range strings.Split(prof, "\n\n") {
		lines := strings.Split(rec, "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		if !ok {
			continue
		}
		c, err := strconv.Atoi(count)
		if err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" {
				frames = append(frames, f[2])
			}
		}
		if len(frames) == 0 {
			continue
		}
		// The innermost frame of a module (not the standard library).
		top := frames[0]
		for _, f := range frames {
			if pkg, _, _ := strings.Cut(f, "/"); strings.Contains(pkg, ".") {
				top = f
				break
			}
		}
		if top != frames[len(frames)-1] {
			top += " ← " + frames[len(frames)-1]
		}
		out = append(out, goroutineGroup{c, top})
	}
	slices.SortFunc(out, func(a, b goroutineGroup) int { return b.count - a.count })
	return out
}

// The fleet process: this test binary re-executed with fleetModeEnv=1 (see
// TestMain) connects one simulated agent per certificate in the file
// BETCODE_BENCH_FLEET_CERTS to BETCODE_BENCH_FLEET_RELAY, prints
// "connected", and exits when its stdin closes.
const fleetModeEnv = "BETCODE_BENCH_FLEET"

func fleetMain() int {
	get := func(k string) string { return os.Getenv("BETCODE_BENCH_FLEET_" + k) }
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench fleet:", err); return 1 }
	cfgs, err := tunnelfleet.ReadCerts(get("CERTS"), get("CA"))
	if err != nil {
		return fail(err)
	}
	par, _ := strconv.Atoi(get("PAR"))
	links, took, err := dialAgents(get("RELAY"), cfgs, max(par, 1))
	if err != nil {
		return fail(err)
	}
	fmt.Printf("connected %d in %s\n", len(links), took)
	io.Copy(io.Discard, os.Stdin)
	return 0 // exiting drops every tunnel at once
}

type fleetProc struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// startFleet starts the fleet process and waits until all its agents are
// connected.
func startFleet(tb testing.TB, r *relayProc, certs string, par int) *fleetProc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fleetModeEnv+"=1", "BETCODE_BENCH_FLEET_RELAY="+r.addr,
		"BETCODE_BENCH_FLEET_CA="+r.caFile(), "BETCODE_BENCH_FLEET_CERTS="+certs, fmt.Sprintf("BETCODE_BENCH_FLEET_PAR=%d", par))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	f := &fleetProc{cmd: cmd, stdin: stdin}
	tb.Cleanup(f.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "connected ") {
		tb.Fatalf("bench fleet failed (%v)", err)
	}
	return f
}

// stop ends the fleet process (idempotent).
func (f *fleetProc) stop() {
	if f.stdin == nil {
		return
	}
	f.stdin.Close()
	f.stdin = nil
	f.cmd.Wait()
}
