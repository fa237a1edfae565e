package channelsvc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxWebFrame is the largest web/1 frame's JSON (docs/e2ee-wire.md §2).
const MaxWebFrame = 4 << 20

// webFrame is one web/1 frame, either way; T says which fields count.
type webFrame struct {
	T             string          `json:"t"`
	ID            json.RawMessage `json:"id,omitempty"`
	Method        string          `json:"method,omitempty"`
	Path          string          `json:"path,omitempty"`
	Body          *string         `json:"body,omitempty"`
	Status        int             `json:"status,omitempty"`
	Subscriptions json.RawMessage `json:"subscriptions,omitempty"`
	Data          *string         `json:"data,omitempty"`
	Code          int             `json:"code,omitempty"`
	Reason        *string         `json:"reason,omitempty"`
}

// errMalformedFrame is wrapped by readWebFrame's errors for a stream that
// is not web/1 frames.
var errMalformedFrame = errors.New("malformed web/1 frame")

// readWebFrame reads one frame: a 4-byte big-endian length, then that
// many bytes of one JSON object with a string "t". It returns io.EOF at a
// clean end between frames.
func readWebFrame(r io.Reader) (webFrame, error) {
	var f webFrame
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return f, fmt.Errorf("%w: the stream ended inside a frame's length", errMalformedFrame)
		}
		return f, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxWebFrame {
		return f, fmt.Errorf("%w: a frame of %d bytes is over the limit of %d", errMalformedFrame, n, MaxWebFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return f, fmt.Errorf("%w: the stream ended inside a frame", errMalformedFrame)
		}
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return webFrame{}, fmt.Errorf("%w: %w", errMalformedFrame, err)
	}
	if f.T == "" {
		return webFrame{}, fmt.Errorf("%w: no \"t\"", errMalformedFrame)
	}
	return f, nil
}

// encodeWebFrame returns f with its length prefix.
func encodeWebFrame(f webFrame) ([]byte, error) {
	j, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode web/1 frame: %w", err)
	}
	if len(j) > MaxWebFrame {
		return nil, fmt.Errorf("a %s frame of %d bytes is over the limit of %d", f.T, len(j), MaxWebFrame)
	}
	out := make([]byte, 4, 4+len(j))
	binary.BigEndian.PutUint32(out, uint32(len(j)))
	return append(out, j...), nil
}
