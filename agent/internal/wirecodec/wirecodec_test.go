package wirecodec

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestCodec(t *testing.T) {
	if !Active() {
		t.Fatal("Active() = false: the registered proto codec is not this package's")
	}
	c := encoding.GetCodecV2(grpcproto.Name)
	ev := &pb.AgentEvent{Sequence: 7, Timestamp: timestamppb.Now(),
		Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "hello"}}}
	wire, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		msg  any
		// same: the output must be wire itself, not a copy
		same bool
	}{
		{"a prepared wire passes through", NewWire(wire), true},
		{"a message is marshaled", ev, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Free()
			got := out.Materialize()
			if !bytes.Equal(got, wire) {
				t.Fatalf("Marshal = %x, want %x", got, wire)
			}
			if tt.same && (len(out) != 1 || unsafe.SliceData(out[0].ReadOnlyData()) != unsafe.SliceData(wire)) {
				t.Error("Marshal copied the pre-encoded bytes")
			}
			var back pb.AgentEvent
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(got)}, &back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&back, ev) {
				t.Errorf("Unmarshal = %v, want %v", &back, ev)
			}
		})
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Error("Marshal of a non-message succeeded")
	}
	// A prepared wire is what a fan-out sends once per subscriber: sending
	// it must not allocate.
	w := NewWire(wire)
	var msg any = w
	if n := testing.AllocsPerRun(100, func() { c.Marshal(msg) }); n != 0 {
		t.Errorf("Marshal of a *Wire allocates %.0f times, want 0", n)
	}
	if NewWire(nil) != nil || (*Wire)(nil).Bytes() != nil || !bytes.Equal(w.Bytes(), wire) {
		t.Error("NewWire(nil) or Bytes is wrong")
	}
}
