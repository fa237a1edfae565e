package tunnel

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// MaxFrameBytes bounds one frame on a call stream.
const MaxFrameBytes = 4 << 20

// ChunkBytes is the largest body chunk put in one data frame.
const ChunkBytes = 64 << 10

// FrameWriter writes length-delimited frames.
type FrameWriter struct {
	w   io.Writer
	buf []byte
}

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// Write writes frames in a single Write call (nil frames are skipped), so
// that a header, a body chunk and trailers that are ready together cross
// the tunnel together.
func (fw *FrameWriter) Write(frames ...*pb.TunnelFrame) error {
	b := fw.buf[:0]
	for _, f := range frames {
		if f == nil {
			continue
		}
		b = protowireAppendVarint(b, uint64(proto.Size(f)))
		var err error
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b, f); err != nil {
			return fmt.Errorf("encode frame: %w", err)
		}
	}
	fw.buf = b[:0]
	if cap(fw.buf) > 1<<20 {
		fw.buf = nil // don't pin a huge buffer
	}
	_, err := fw.w.Write(b)
	return err
}

func protowireAppendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// FrameReader reads length-delimited frames.
type FrameReader struct{ r *bufio.Reader }

// NewFrameReader returns a FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 4<<10)}
}

// Read reads one frame. io.EOF means the stream ended between frames.
func (fr *FrameReader) Read() (*pb.TunnelFrame, error) {
	f := &pb.TunnelFrame{}
	err := protodelim.UnmarshalOptions{MaxSize: MaxFrameBytes}.UnmarshalFrom(fr.r, f)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("read frame: %w", err)
	}
	return f, nil
}

// Metadata converts header-style values to a frame.
func Metadata(h map[string][]string, trailers bool) *pb.TunnelFrame {
	md := &pb.TunnelMetadata{Trailers: trailers}
	for k, vs := range h {
		md.Entries = append(md.Entries, &pb.MetadataEntry{Key: k, Values: vs})
	}
	return &pb.TunnelFrame{Payload: &pb.TunnelFrame_Metadata{Metadata: md}}
}

// DataFrame carries body bytes.
func DataFrame(b []byte, eos bool) *pb.TunnelFrame {
	return &pb.TunnelFrame{Payload: &pb.TunnelFrame_Stream{Stream: &pb.StreamFrame{Data: b, EndOfStream: eos}}}
}

// CancelFrame abandons a call.
func CancelFrame(msg string) *pb.TunnelFrame {
	return &pb.TunnelFrame{Payload: &pb.TunnelFrame_Error{Error: &pb.ErrorFrame{Code: "CANCELLED", Message: msg}}}
}
