package h2wire_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/h2wire"
)

// frameLog is what a peer makes of a byte stream of frames: each stream's
// DATA bytes, the other frames in order (with the DATA bytes of each
// stream seen before them), and the number of DATA frames.
type frameLog struct {
	data   map[uint32][]byte
	others []string
	frames int
}

func readFrames(t testing.TB, b []byte) frameLog {
	t.Helper()
	fr := http2.NewFramer(io.Discard, bytes.NewReader(b))
	fr.SetMaxReadFrameSize(1 << 20)
	l := frameLog{data: map[uint32][]byte{}}
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return l
		}
		if err != nil {
			t.Fatalf("the merged bytes do not parse: %v", err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			if f.Header().Length > h2wire.MergedFrameMax && f.Flags == 0 {
				t.Fatalf("a merged DATA frame of %d bytes", f.Header().Length)
			}
			l.data[f.StreamID] = append(l.data[f.StreamID], f.Data()...)
			l.frames++
			if f.Flags != 0 {
				l.others = append(l.others, fmt.Sprintf("DATA flags %v stream %d after %d bytes", f.Flags, f.StreamID, len(l.data[f.StreamID])))
			}
		default:
			l.others = append(l.others, fmt.Sprintf("%v after %d bytes of its stream", f.Header(), len(l.data[f.Header().StreamID])))
		}
	}
}

// randomFrames writes n frames as a gRPC server might: DATA of a few
// streams (some ending them, some padded), HEADERS, WINDOW_UPDATE, PING.
func randomFrames(r *rand.Rand, n int) []byte {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	for range n {
		sid := uint32(1 + 2*r.IntN(3))
		switch k := r.IntN(10); {
		case k < 6:
			_ = fr.WriteData(sid, r.IntN(20) == 0, bytes.Repeat([]byte{byte('a' + sid)}, r.IntN(300)))
		case k == 6:
			_ = fr.WriteDataPadded(sid, false, bytes.Repeat([]byte{'p'}, r.IntN(50)), make([]byte, 3))
		case k == 7:
			_ = fr.WriteData(sid, false, bytes.Repeat([]byte{'b'}, 16000+r.IntN(384)))
		case k == 8:
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: []byte{0x88}, EndHeaders: true})
		default:
			_ = fr.WriteWindowUpdate(0, uint32(1+r.IntN(1000)))
		}
	}
	return buf.Bytes()
}

func TestDataMergerKeepsEveryByteAndOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		in := randomFrames(r, 1+r.IntN(60))
		// Cut the bytes at random places, as writes gathered in a channel.
		var m h2wire.DataMerger
		var out []byte
		for rest := in; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), []int{3, 40, 700, 70000}[round%4]))
			out = m.Merge(out, rest[:n])
			rest = rest[n:]
		}
		want, got := readFrames(t, in), readFrames(t, out)
		for sid, b := range want.data {
			if !bytes.Equal(got.data[sid], b) {
				t.Fatalf("round %d: stream %d's bytes changed (%d → %d)", round, sid, len(b), len(got.data[sid]))
			}
		}
		if fmt.Sprint(got.others) != fmt.Sprint(want.others) {
			t.Fatalf("round %d: frames other than plain DATA changed or moved:\n got %v\nwant %v", round, got.others, want.others)
		}
		if got.frames > want.frames {
			t.Fatalf("round %d: %d DATA frames out of %d", round, got.frames, want.frames)
		}
	}
}

func TestDataMergerJoinsAStreamsEvents(t *testing.T) {
	// 500 events of one stream, as grpc-go frames them: 500 DATA frames in;
	// out, as few as 16 KiB frames allow.
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	event := bytes.Repeat([]byte{'e'}, 69) // a gRPC message: 5-byte prefix and 64 bytes
	for range 500 {
		_ = fr.WriteData(1, false, event)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	var m h2wire.DataMerger
	out := m.Merge(nil, buf.Bytes())
	got := readFrames(t, out)
	if got.frames != 3 || len(got.data[1]) != 500*69 { // 34,500 bytes: 16,384 + 16,384 + 1,732
		t.Fatalf("500 events of 69 bytes: %d DATA frames, %d bytes", got.frames, len(got.data[1]))
	}
	if len(out) != buf.Len()-497*9 {
		t.Fatalf("%d bytes out of %d", len(out), buf.Len())
	}
}

func TestDataMergerHoldsNothingBack(t *testing.T) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteData(1, false, []byte("hello"))
	_ = fr.WriteData(1, false, []byte("world"))
	in := buf.Bytes()
	var m h2wire.DataMerger
	var out []byte
	for i := range in { // one byte at a time: each comes out at once
		out = m.Merge(out, in[i:i+1])
		if len(out) != i+1 {
			t.Fatalf("after %d bytes in, %d out", i+1, len(out))
		}
	}
}

func BenchmarkDataMerger(b *testing.B) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	for range 500 {
		_ = fr.WriteData(1, false, make([]byte, 69))
	}
	in := buf.Bytes()
	var m h2wire.DataMerger
	out := make([]byte, 0, len(in))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		out = m.Merge(out[:0], in)
	}
}

func FuzzDataMerger(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		f.Add(randomFrames(r, 10), uint16(7))
	}
	f.Add([]byte{0, 0, 5, 0, 0, 0, 0, 0, 1, 'a'}, uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		// Any bytes, well-formed or not, come out whole and unmerged where
		// they do not parse: the same length or shorter by 9 per join.
		var m h2wire.DataMerger
		var out []byte
		step := 1 + int(cut)%64
		for rest := in; len(rest) > 0; {
			n := min(step, len(rest))
			out = m.Merge(out, rest[:n])
			rest = rest[n:]
		}
		if len(out) > len(in) || (len(in)-len(out))%9 != 0 {
			t.Fatalf("%d bytes in, %d out", len(in), len(out))
		}
	})
}
