package channelsvc

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

func frameBytes(j string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(j))), j...)
}

// FuzzWebFrames feeds the web/1 frame decoder any byte stream: it never
// panics, stops at the first error, and what it decodes encodes back into
// a frame it decodes the same way.
func FuzzWebFrames(f *testing.F) {
	f.Add(frameBytes(`{"t":"req","id":1,"method":"GET","path":"/sessions"}`))
	f.Add(append(frameBytes(`{"t":"ws.open","subscriptions":[{"sessionId":"s","afterSequence":3}]}`), frameBytes(`{"t":"ws","data":"{}"}`)...))
	f.Add(frameBytes(`{"t":"cancel","id":7}`))
	f.Add(frameBytes(`null`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for range 64 {
			fr, err := readWebFrame(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, errMalformedFrame) {
					t.Fatalf("error neither EOF nor malformed: %v", err)
				}
				return
			}
			enc, err := encodeWebFrame(fr)
			if err != nil {
				t.Fatalf("a decoded frame does not encode: %v", err)
			}
			again, err := readWebFrame(bytes.NewReader(enc))
			var id1, id2 bytes.Buffer
			_ = json.Compact(&id1, fr.ID)
			_ = json.Compact(&id2, again.ID)
			if err != nil || again.T != fr.T || !bytes.Equal(id1.Bytes(), id2.Bytes()) {
				t.Fatalf("round trip of %+v: %+v, %v", fr, again, err)
			}
		}
	})
}
