// Package wirecodec lets a gRPC stream send a message that is already in
// protobuf wire format without marshaling it again.
//
// Importing the package replaces gRPC's "proto" codec, process-wide, with
// one that sends a [Wire] message's bytes as they are and hands every
// other message to the proto codec it replaces, so that nothing else
// changes. The agent uses it to fan one event out to many subscribers: the
// session marshals the event once (for its log) and every stream sends
// those bytes.
package wirecodec

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto" // registers the codec wrapped below
	"google.golang.org/grpc/mem"
)

// Wire is a message in protobuf wire format, as proto.Marshal returns it,
// prepared once to be sent on any number of streams at once: passed to a
// stream's SendMsg, its bytes are the message on the wire, and the send
// allocates nothing. Nothing checks that they encode the message type the
// stream sends. gRPC may still read them after SendMsg returns (the
// transport writes asynchronously), so they must never be modified.
type Wire struct {
	s mem.BufferSlice // one SliceBuffer: not pooled, so gRPC's Free of it is a no-op
}

// NewWire prepares b for sending; nil if b is nil.
func NewWire(b []byte) *Wire {
	if b == nil {
		return nil
	}
	return &Wire{s: mem.BufferSlice{mem.SliceBuffer(b)}}
}

// Bytes returns the message's wire bytes (nil for a nil Wire).
func (w *Wire) Bytes() []byte {
	if w == nil {
		return nil
	}
	return w.s[0].ReadOnlyData()
}

// codec is the "proto" codec with a pass-through for Wire.
type codec struct {
	base encoding.CodecV2 // gRPC's proto codec
}

// installed is the codec this package registered.
var installed *codec

func init() {
	base := encoding.GetCodecV2(grpcproto.Name)
	if base == nil {
		// grpc/encoding/proto registers itself in its init, which runs
		// before this one.
		panic("wirecodec: gRPC's proto codec is not registered")
	}
	installed = &codec{base: base}
	encoding.RegisterCodecV2(installed)
}

// Active reports whether gRPC's "proto" codec is this package's: only
// then can a Wire be sent. It is false if a package initialised later
// registered another "proto" codec (or a server forces another codec with
// grpc.ForceServerCodecV2, which Active cannot see); callers then send the
// message itself.
func Active() bool {
	c, ok := encoding.GetCodecV2(grpcproto.Name).(*codec)
	return ok && c == installed
}

// Marshal returns a Wire's shared buffer as it is (gRPC only reads it, so
// every stream can use it at once) and marshals anything else with the
// proto codec. Its errors are the proto codec's, unchanged, so that
// replacing it changes nothing else.
func (c *codec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*Wire); ok && w != nil {
		return w.s, nil
	}
	return c.base.Marshal(v)
}

// Unmarshal is the proto codec's: Wire is for sending only.
func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.base.Unmarshal(data, v)
}

// Name is "proto", the name of the codec it replaces.
func (c *codec) Name() string { return grpcproto.Name }
