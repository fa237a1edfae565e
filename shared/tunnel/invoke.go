package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Result is the outcome of a call made with Invoke.
type Result struct {
	Code     int    // grpc status code (0 = OK)
	Message  string // grpc-message, decoded
	Response []byte // the response message (unary), without gRPC framing
}

// Invoke makes one unary call over stream with an already-serialized request
// message, as the relay does to deliver a buffered request. The stream is
// closed when Invoke returns. An error means the call's outcome is unknown
// (the tunnel broke); a Result with a non-zero Code is the agent's answer.
func Invoke(stream io.ReadWriteCloser, requestID, service, method string, md http.Header, request []byte) (*Result, error) {
	defer stream.Close()
	h := md.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/grpc")
	first := Metadata(h, false)
	first.RequestId, first.ServiceName, first.MethodName = requestID, service, method
	fw := NewFrameWriter(stream)
	if err := fw.Write(first); err != nil {
		return nil, err
	}
	if err := fw.Write(DataFrame(Frame(request), true)); err != nil {
		return nil, err
	}
	fr := NewFrameReader(stream)
	var body []byte
	for {
		f, err := fr.Read()
		if err != nil {
			return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
		}
		switch pl := f.Payload.(type) {
		case *pb.TunnelFrame_Stream:
			body = append(body, pl.Stream.Data...)
		case *pb.TunnelFrame_Error:
			return nil, errors.New("agent ended the call: " + pl.Error.Message)
		case *pb.TunnelFrame_Metadata:
			if !pl.Metadata.Trailers {
				continue
			}
			tr := make(http.Header, len(pl.Metadata.Entries))
			for _, e := range pl.Metadata.Entries {
				tr[textproto.CanonicalMIMEHeaderKey(e.Key)] = e.Values
			}
			res, err := newResult(tr, body)
			if err != nil {
				return nil, fmt.Errorf("call %s/%s: %w", service, method, err)
			}
			return res, nil
		}
	}
}

// newResult reads a unary call's outcome from its trailers (grpc-status,
// grpc-message) and, for OK, its body's one message.
func newResult(trailers http.Header, body []byte) (*Result, error) {
	code, err := strconv.Atoi(trailers.Get("Grpc-Status"))
	if err != nil {
		return nil, errors.New("answer without grpc-status")
	}
	res := &Result{Code: code, Message: decodeGrpcMessage(trailers.Get("Grpc-Message"))}
	if code == 0 {
		if res.Response, err = Unframe(body); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Frame adds gRPC's 5-byte message prefix (uncompressed).
func Frame(msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// Unframe returns the single message in a gRPC body.
func Unframe(body []byte) ([]byte, error) {
	if len(body) < 5 {
		return nil, fmt.Errorf("gRPC body of %d bytes has no message", len(body))
	}
	if body[0] != 0 {
		return nil, errors.New("compressed gRPC messages are not supported here")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if uint64(len(body)-5) != uint64(n) {
		return nil, fmt.Errorf("gRPC body has %d bytes after the prefix, the prefix says %d", len(body)-5, n)
	}
	return body[5:], nil
}

func decodeGrpcMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
