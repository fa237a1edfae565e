// Package h2wire holds the HTTP/2 rules that the relay's own server
// (relay/internal/h2front) and client (shared/h2client) both keep, as
// golang.org/x/net/http2 keeps them: when a window refund is worth a
// WINDOW_UPDATE, which SETTINGS frames are refused, and how many bytes one
// ReadFrame may consume; and DataMerger, which joins a stream's small DATA
// frames in bytes an end-to-end channel carries (agent/channelsvc).
package h2wire

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/net/http2"
)

// MinRefund is the smallest refund worth a WINDOW_UPDATE of its own.
const MinRefund = 4 << 10

// RefundDue reports whether unsent refunded bytes are due to the peer,
// which has avail bytes of window left: as x/net's inflow.add, once they
// reach batch (at least MinRefund; 0 means MinRefund) or avail (the update
// at least doubles the window). A small unary call costs no WINDOW_UPDATE.
//
// A stream may batch a quarter of its window, as grpc-go does: its unread
// bytes are its own, so holding its refund back never stalls another, and a
// thousand streams each read a few events at a time send 64 times fewer
// WINDOW_UPDATEs (each its own write) than at 4 KiB. A connection's refund
// cannot wait long: waiting for half its window to be owed could leave the
// peer none while other streams' unread bytes hold the rest, stalling every
// stream; a batch of a small fraction of it (1/1024) is safe.
func RefundDue(unsent, avail, batch int64) bool {
	return unsent > 0 && (unsent >= max(batch, MinRefund) || unsent >= avail)
}

// MaxSettings bounds the entries of one SETTINGS frame, as x/net's server
// does: there are only seven settings, and a 1 MiB frame holds 174,762.
const MaxSettings = 100

// CheckSettings says why f is a connection error PROTOCOL_ERROR (more than
// MaxSettings entries, or one setting repeated: it would only make the
// receiver loop), or returns nil.
func CheckSettings(f *http2.SettingsFrame) error {
	if f.NumSettings() > MaxSettings || f.HasDuplicates() {
		return fmt.Errorf("SETTINGS with %d entries (more than %d, or duplicates)", f.NumSettings(), MaxSettings)
	}
	return nil
}

// ErrFrameBytes is FrameReader's error past its limit: a connection error
// ENHANCE_YOUR_CALM.
var ErrFrameBytes = errors.New("too many bytes read for one frame (a header block in endless CONTINUATION frames?)")

// FrameReader is a Framer's reader that bounds the bytes one ReadFrame
// consumes (Reset it before each). The Framer merges HEADERS and its
// CONTINUATION frames within one ReadFrame and bounds the decoded size of
// the block, not the number of frames, so a peer sending empty
// CONTINUATION frames without end would keep the reader busy for ever.
type FrameReader struct {
	R     io.Reader
	Limit int64 // FrameLimit
	n     int64
}

// FrameLimit is what one ReadFrame may consume: a frame of the largest
// size read, plus a header block in CONTINUATION frames of four times the
// header list limit (hpack encodes fields to less than their counted size,
// padding aside), plus slack for frame headers and padding.
func FrameLimit(maxFrameSize, maxHeaderList uint32) int64 {
	return int64(maxFrameSize) + 4*int64(maxHeaderList) + 1<<20
}

// Reset starts the count of a new ReadFrame.
func (r *FrameReader) Reset() { r.n = 0 }

// Read reads from R, failing with ErrFrameBytes past the limit.
func (r *FrameReader) Read(p []byte) (int, error) {
	if r.n >= r.Limit {
		return 0, ErrFrameBytes
	}
	if rest := r.Limit - r.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.R.Read(p)
	r.n += int64(n)
	return n, err
}
