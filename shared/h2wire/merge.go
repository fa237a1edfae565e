package h2wire

import "encoding/binary"

// frameHeaderLen is the length of an HTTP/2 frame header (RFC 9113 §4.1).
const frameHeaderLen = 9

// MergedFrameMax is the largest DATA payload DataMerger makes: the initial
// SETTINGS_MAX_FRAME_SIZE, which every HTTP/2 peer accepts whatever it
// advertised.
const MergedFrameMax = 16384

// frameTypeData is the DATA frame type.
const frameTypeData = 0x0

// DataMerger joins adjacent DATA frames of one stream in the bytes an
// HTTP/2 endpoint writes, so its peer handles one frame where it would
// have handled many. grpc-go sends each message of a stream in a DATA frame
// of its own; an end-to-end channel gathers the bytes written while its
// previous message was on its way (shared/e2ee.Conn), and merging the
// frames it gathered lets the receiving gRPC transport parse, account and
// hand over hundreds of small events as one frame, as the relay's copy
// loop does for the calls it can read.
//
// Only whole frames that one Merge call holds are merged, and only DATA
// frames without flags (no END_STREAM, no padding) that follow each other
// on one stream, up to MergedFrameMax bytes: the stream's bytes, the order
// of all frames and flow control are unchanged. A frame that a call holds
// only in part is passed on as it is and its remainder in the next call:
// Merge never holds bytes back. Its input is frames only (a server's
// bytes, or a client's after its preface).
//
// A DataMerger is not safe for concurrent use.
type DataMerger struct {
	hdr  [frameHeaderLen]byte // a header passed on in part
	nhdr int                  // its bytes seen
	rest int                  // payload bytes of a passed-on frame still to come
}

// Merge appends src to dst, with the adjacent mergeable DATA frames that
// src holds whole joined, and returns the extended slice.
func (m *DataMerger) Merge(dst, src []byte) []byte {
	open := -1 // in dst: the header of a DATA frame the next one may join
	for len(src) > 0 {
		if m.rest > 0 { // the remainder of a frame passed on before
			n := min(m.rest, len(src))
			dst = append(dst, src[:n]...)
			src, m.rest = src[n:], m.rest-n
			continue
		}
		if m.nhdr > 0 || len(src) < frameHeaderLen { // a header in parts
			n := copy(m.hdr[m.nhdr:], src)
			dst = append(dst, src[:n]...)
			src, m.nhdr = src[n:], m.nhdr+n
			if m.nhdr == frameHeaderLen {
				m.nhdr, m.rest = 0, frameLen(m.hdr[:])
			}
			open = -1
			continue
		}
		n := frameLen(src)
		if len(src) < frameHeaderLen+n { // the frame goes on in the next call
			dst = append(dst, src...)
			m.rest = frameHeaderLen + n - len(src)
			return dst
		}
		frame := src[:frameHeaderLen+n]
		src = src[len(frame):]
		if !mergeable(frame) {
			dst = append(dst, frame...)
			open = -1
			continue
		}
		if open >= 0 && streamID(dst[open:]) == streamID(frame) && frameLen(dst[open:])+n <= MergedFrameMax {
			dst = append(dst, frame[frameHeaderLen:]...)
			setFrameLen(dst[open:], frameLen(dst[open:])+n)
			continue
		}
		open = len(dst)
		dst = append(dst, frame...)
	}
	return dst
}

// frameLen is the payload length in header h.
func frameLen(h []byte) int { return int(h[0])<<16 | int(h[1])<<8 | int(h[2]) }

// setFrameLen sets the payload length in header h.
func setFrameLen(h []byte, n int) { h[0], h[1], h[2] = byte(n>>16), byte(n>>8), byte(n) }

// streamID is the stream identifier in header h.
func streamID(h []byte) uint32 { return binary.BigEndian.Uint32(h[5:9]) & (1<<31 - 1) }

// mergeable reports whether a whole frame may join, or be joined by, a
// neighbour: DATA of a stream, no flags, within MergedFrameMax.
func mergeable(frame []byte) bool {
	return frame[3] == frameTypeData && frame[4] == 0 && streamID(frame) != 0 && frameLen(frame) <= MergedFrameMax
}
