package h2front

import (
	"net/http"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestNoDynamicTables: with NoDynamicTables the server asks the peer for
// no HPACK table (SETTINGS_HEADER_TABLE_SIZE 0) and indexes none of its
// own answers: the same answer twice costs the same header bytes twice.
func TestNoDynamicTables(t *testing.T) {
	leakcheck.Goroutines(t)
	for _, off := range []bool{false, true} {
		ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Answer", "the same long header value, answer after answer")
			w.WriteHeader(200)
		}), func(s *Server) { s.NoDynamicTables = off })
		rc := dialRaw(t, ts.addr)
		rc.buf.WriteString(http2.ClientPreface)
		_ = rc.bfr.WriteSettings()
		rc.flush()
		asked := false
		for {
			if sf, ok := rc.read().(*http2.SettingsFrame); ok && !sf.IsAck() {
				v, ok := sf.Value(http2.SettingHeaderTableSize)
				asked = ok && v == 0
				break
			}
		}
		if asked != off {
			t.Errorf("NoDynamicTables %v: SETTINGS_HEADER_TABLE_SIZE 0 asked: %v", off, asked)
		}
		_ = rc.bfr.WriteSettingsAck()
		var sizes []int
		for id := uint32(1); id <= 3; id += 2 {
			rc.writeHeaders(id, true, rc.headerBlock("/x"))
			rc.flush()
			for {
				if h, ok := rc.read().(*http2.MetaHeadersFrame); ok {
					sizes = append(sizes, int(h.Header().Length))
					break
				}
			}
		}
		// Indexed, the second answer's header is one byte instead of ~40
		// (the first of an unindexed connection has one byte more: the
		// table size update).
		if indexed := sizes[0]-sizes[1] > 8; indexed == off {
			t.Errorf("NoDynamicTables %v: answers' header blocks %v bytes: indexed %v", off, sizes, indexed)
		}
	}
}
