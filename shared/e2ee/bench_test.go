package e2ee

// Medians of three runs of
//
//	go test -run '^$' -bench . -benchtime 1s -count 3 ./shared/e2ee/
//
// on a 2-vCPU AMD EPYC VM (linux/amd64, Go 1.26.8, other builds running):
//
//	BenchmarkHandshake-2         627 µs/op  0.667 cpu-ms/op (target <= 2)  30.3 KB/op  384 allocs/op
//	BenchmarkConnThroughput-2   12.3 µs/op  1331 MB/s (16 KiB writes)      37.1 KB/op    7 allocs/op
//	BenchmarkSeal-2              998 ns/op  1026 MB/s (1 KiB messages)       32 B/op     2 allocs/op

import (
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkHandshake runs whole Noise_IK handshakes, Dial and Accept, over a
// Pipe. cpu-ms/op is the process's CPU time (both sides, user and system)
// per handshake; the target is at most 2 ms.
func BenchmarkHandshake(b *testing.B) {
	device, machine := newKey(b), newKey(b)
	ctx := context.Background()
	authorize := allow(device)
	b.ReportAllocs()
	cpu0, cpuOK := processCPU()
	for b.Loop() {
		dt, mt := Pipe()
		acc := goAccept(ctx, mt, machine, testMachineID, authorize)
		dc, err := Dial(ctx, dt, device, testMachineID, machine.Public, []byte("bench"))
		if err != nil {
			b.Fatal(err)
		}
		res := <-acc
		if res.err != nil {
			b.Fatal(res.err)
		}
		dc.Close()
		res.c.Close()
	}
	if cpu1, _ := processCPU(); cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}

// BenchmarkConnThroughput writes 16 KiB at a time through a Conn over a
// Pipe while the other side reads.
func BenchmarkConnThroughput(b *testing.B) {
	dc, mc := open(b, newKey(b), newKey(b))
	const chunk = 16 << 10
	buf := make([]byte, chunk)
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, mc)
		done <- err
	}()
	b.SetBytes(chunk)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dc.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	dc.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSeal seals and opens one 1 KiB message with a channel's cipher
// states: the per-message cost without a carrier.
func BenchmarkSeal(b *testing.B) {
	dc, mc := open(b, newKey(b), newKey(b))
	msg := make([]byte, 1024)
	out := make([]byte, 0, len(msg)+tagLen)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		sealed, err := dc.send.Encrypt(out[:0], nil, msg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mc.recv.Decrypt(sealed[:0], nil, sealed); err != nil {
			b.Fatal(err)
		}
	}
}
