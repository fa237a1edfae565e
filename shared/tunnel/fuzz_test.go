package tunnel

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// byteStream is a call's yamux stream as the fuzzers see it: reads come
// from the fuzzed bytes, writes go nowhere.
type byteStream struct{ r io.Reader }

func (s *byteStream) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *byteStream) Write(p []byte) (int, error) { return len(p), nil }
func (s *byteStream) Close() error                { return nil }

// encodeFrames is what a FrameWriter puts on a stream for frames.
func encodeFrames(t testing.TB, frames ...*pb.TunnelFrame) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := NewFrameWriter(&b).Write(frames...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// orderedMetadata is Metadata with its entries in the order given (key, value,
// key, value, ...), so that seeds encode the same every time.
func orderedMetadata(trailers bool, kv ...string) *pb.TunnelFrame {
	md := &pb.TunnelMetadata{Trailers: trailers}
	for i := 0; i+1 < len(kv); i += 2 {
		md.Entries = append(md.Entries, &pb.MetadataEntry{Key: kv[i], Values: []string{kv[i+1]}})
	}
	return &pb.TunnelFrame{Payload: &pb.TunnelFrame_Metadata{Metadata: md}}
}

// frameSeeds are valid call-protocol streams, both directions.
func frameSeeds(t testing.TB) map[string][]byte {
	request := orderedMetadata(false, "content-type", "application/grpc", "grpc-timeout", "5S", "x-betcode-user", "local")
	request.RequestId, request.ServiceName, request.MethodName = "7", "betcode.v1.AgentService", "QueueMessage"
	msg, err := proto.Marshal(&pb.QueueMessageRequest{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	ok := orderedMetadata(true, "grpc-status", "0")
	notFound := orderedMetadata(true, "grpc-status", "5", "grpc-message", "no session %22s1%22")
	heartbeat := &pb.TunnelFrame{Payload: &pb.TunnelFrame_Heartbeat{Heartbeat: &pb.TunnelHeartbeat{}}}
	// A length prefix one over MaxFrameBytes, and nothing after it.
	oversized := protowire.AppendVarint(nil, MaxFrameBytes+1)
	return map[string][]byte{
		"request-unary":      encodeFrames(t, request, DataFrame(Frame(msg), true)),
		"request-streaming":  encodeFrames(t, request, DataFrame(Frame(msg), false), DataFrame(Frame(msg)[:3], false), DataFrame(Frame(msg)[3:], false), DataFrame(nil, true)),
		"request-cancelled":  encodeFrames(t, request, DataFrame(Frame(msg), false), CancelFrame("context canceled")),
		"response-unary":     encodeFrames(t, orderedMetadata(false, "content-type", "application/grpc"), DataFrame(Frame(msg), false), ok),
		"response-error":     encodeFrames(t, notFound),
		"response-heartbeat": encodeFrames(t, heartbeat, ok),
		"oversized-length":   oversized,
	}
}

// unframeSeeds are gRPC bodies: valid ones and the edge cases.
func unframeSeeds(t testing.TB) map[string][]byte {
	msg, err := proto.Marshal(&pb.QueueMessageRequest{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	long := Frame(msg)
	binary.BigEndian.PutUint32(long[1:5], 0xffffffff)
	return map[string][]byte{
		"message":           Frame(msg),
		"empty-message":     Frame(nil),
		"length-over-body":  long,
		"compressed":        append([]byte{1}, Frame(msg)[1:]...),
		"two-messages":      append(Frame(msg), Frame(msg)...),
		"truncated-prefix":  Frame(msg)[:3],
		"length-under-body": append(Frame(msg), 0),
	}
}

// addSeeds adds seeds to f and, with -update-fuzz-seeds, writes them to
// testdata/fuzz/<name> in the go fuzzing corpus format.
func addSeeds(f *testing.F, seeds map[string][]byte) {
	dir := filepath.Join("testdata", "fuzz", f.Name())
	for name, b := range seeds {
		f.Add(b)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				f.Fatal(err)
			}
			file := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(file), 0o644); err != nil {
				f.Fatal(err)
			}
		}
	}
}

// FuzzFrameDecode feeds arbitrary bytes to the TunnelFrame call
// protocol's decoders: the frame reader, the relay reading an agent's
// answer (Invoke) and the agent serving a relay's call (Serve). None may
// panic, hang or accept a frame over MaxFrameBytes, and every frame read
// must encode back to an equal frame.
func FuzzFrameDecode(f *testing.F) {
	addSeeds(f, frameSeeds(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		var frames []*pb.TunnelFrame
		fr := NewFrameReader(bytes.NewReader(data))
		var readErr error
		for {
			fm, err := fr.Read()
			if err != nil {
				readErr = err
				break
			}
			frames = append(frames, fm)
			if len(frames) > len(data) {
				t.Fatalf("%d frames from %d bytes", len(frames), len(data))
			}
		}
		if size, n := protowire.ConsumeVarint(data); n > 0 && size > MaxFrameBytes {
			if len(frames) != 0 || readErr == nil || errors.Is(readErr, io.EOF) {
				t.Fatalf("a first frame of %d bytes (over %d) was not refused: %d frames, %v", size, MaxFrameBytes, len(frames), readErr)
			}
		}
		again := NewFrameReader(bytes.NewReader(encodeFrames(t, frames...)))
		for i, want := range frames {
			got, err := again.Read()
			if err != nil || !proto.Equal(got, want) {
				t.Fatalf("frame %d re-read as %v, %v; want %v", i, got, err, want)
			}
		}

		// The relay reading an answer: a result or an error, never a
		// panic; a result only from trailers.
		res, err := Invoke(&byteStream{r: bytes.NewReader(data)}, "1", "betcode.v1.AgentService", "QueueMessage", nil, []byte("x"))
		if err == nil && res == nil {
			t.Fatal("Invoke returned neither a result nor an error")
		}

		// The agent serving a call; the handler reads the whole body,
		// as grpc-go's does, then answers.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_ = Serve(ctx, &byteStream{r: bytes.NewReader(data)}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			_, _ = w.Write(Frame([]byte("answer")))
			w.Header().Set("Grpc-Status", "0")
		}), "fuzz")
	})
}

// FuzzUnframe feeds arbitrary bodies to Unframe: it must never panic,
// accept exactly the bodies holding one uncompressed message of the
// length their prefix announces (refusing lengths past the body), and
// return that message.
func FuzzUnframe(f *testing.F) {
	addSeeds(f, unframeSeeds(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, err := Unframe(body)
		valid := len(body) >= 5 && body[0] == 0 && uint64(binary.BigEndian.Uint32(body[1:5])) == uint64(len(body)-5)
		if valid != (err == nil) {
			t.Fatalf("Unframe(%x) = %v; the body is valid: %v", body, err, valid)
		}
		if err == nil && !bytes.Equal(Frame(msg), body) {
			t.Fatalf("Frame(Unframe(%x)) = %x", body, Frame(msg))
		}
	})
}

// FuzzGrpcMessage checks that the status message codec round-trips and
// that decoding any header value is safe.
func FuzzGrpcMessage(f *testing.F) {
	for _, s := range []string{"", "plain", "100% done", "no session \"s1\"", "caf\u00e9\n", "%", "%4", "%zz", "%41%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := encodeGrpcMessage(s)
		if strings.ContainsFunc(enc, func(r rune) bool { return r < ' ' || r > '~' }) {
			t.Fatalf("encodeGrpcMessage(%q) = %q: not printable ASCII", s, enc)
		}
		if got := decodeGrpcMessage(enc); got != s {
			t.Fatalf("decodeGrpcMessage(encodeGrpcMessage(%q)) = %q", s, got)
		}
		_ = decodeGrpcMessage(s)
	})
}

// The seeds on disk are the ones frameSeeds and unframeSeeds make (run
// with -update-fuzz-seeds after changing them).
func TestFuzzSeedsUpToDate(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{"FuzzFrameDecode": frameSeeds(t), "FuzzUnframe": unframeSeeds(t)} {
		for name, b := range seeds {
			path := filepath.Join("testdata", "fuzz", target, "seed-"+name)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestFuzzSeedsUpToDate -update-fuzz-seeds ./shared/tunnel/)", err)
			}
			if want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b); string(got) != want {
				t.Errorf("%s is stale (run with -update-fuzz-seeds)", path)
			}
		}
	}
}

// A frame announced over MaxFrameBytes is refused from its length prefix
// alone: nothing after the prefix is read, let alone allocated for.
func TestFrameReaderRefusesOversizedFrames(t *testing.T) {
	tests := []struct {
		name string
		size uint64
	}{
		{"one over", MaxFrameBytes + 1},
		{"4 GiB", 1 << 32},
		{"largest varint", 1<<64 - 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := protowire.AppendVarint(nil, tc.size)
			r := io.MultiReader(bytes.NewReader(prefix), &failReader{})
			_, err := NewFrameReader(r).Read()
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, errReadPastPrefix) {
				t.Fatalf("Read() = %v, want a size error", err)
			}
		})
	}
}

var errReadPastPrefix = errors.New("read past the length prefix")

type failReader struct{}

func (*failReader) Read([]byte) (int, error) { return 0, errReadPastPrefix }
