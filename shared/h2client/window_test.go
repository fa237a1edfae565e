package h2client

import (
	"context"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// TestUnreadCallsDoNotStall: calls whose bodies nobody reads hold all of
// the connection window but one stream window; a call that is read still
// gets more than the whole connection window through, because the bytes
// it reads are refunded to the connection as it goes. The server honours
// both windows, and counts the connection WINDOW_UPDATEs it gets.
func TestUnreadCallsDoNotStall(t *testing.T) {
	leakcheck.Goroutines(t)
	const (
		streamWin = 64 << 10
		connWin   = 1 << 20
		unread    = connWin/streamWin - 1 // calls left unread
		readSize  = 2 << 20               // the call that is read
	)
	readID := uint32(2*unread + 1)
	refunded := make(chan int64, 1)
	addr := startRaw(t, func(rc *rawConn) {
		conn, init := int64(initialWindow), int64(initialWindow)
		win := map[uint32]int64{}
		left := map[uint32]int{}
		var order []uint32
		var refunds int64
		opened := false // the client's first connection WINDOW_UPDATE opens its window
		data := make([]byte, 16384)
		for {
			sent := false
			for _, id := range order {
				n := int(min(int64(left[id]), int64(len(data)), conn, win[id]))
				if n <= 0 {
					continue
				}
				left[id] -= n
				conn -= int64(n)
				win[id] -= int64(n)
				end := id == readID && left[id] == 0
				if rc.fr.WriteData(id, end, data[:n]) != nil {
					return
				}
				if end {
					refunded <- refunds
				}
				sent = true
			}
			if sent {
				continue
			}
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				f.ForeachSetting(func(s http2.Setting) error {
					if s.ID == http2.SettingInitialWindowSize {
						init = int64(s.Val)
					}
					return nil
				})
			case *http2.WindowUpdateFrame:
				switch {
				case f.StreamID != 0:
					win[f.StreamID] += int64(f.Increment)
				case opened:
					refunds += int64(f.Increment)
					fallthrough
				default:
					conn += int64(f.Increment)
					opened = true
				}
			case *http2.MetaHeadersFrame:
				id := f.StreamID
				order = append(order, id)
				win[id] = init
				left[id] = streamWin // fills the window of an unread call
				if id == readID {
					left[id] = readSize
				}
				rc.writeHeaders(id, false, ":status", "200")
			}
		}
	})
	cc, _ := dial(t, addr, Options{StreamWindow: streamWin, ConnWindow: connWin})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range unread {
		resp, err := cc.RoundTrip(simpleReq(ctx, addr))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
	}
	waitFor(t, "the unread calls' windows to fill", func() bool {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return cc.recvWindow == connWin-unread*streamWin
	})
	resp, err := cc.RoundTrip(simpleReq(ctx, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != readSize {
		t.Fatalf("read %d bytes of %d: %v", n, readSize, err)
	}
	// The server could only send it all if it got refunds for all but the
	// stream window that was left of the connection's.
	if r := <-refunded; r < readSize-streamWin {
		t.Fatalf("server got %d bytes of connection WINDOW_UPDATE, want at least %d", r, readSize-streamWin)
	}
}

// TestSmallAnswersNoWindowUpdate: small answers read to the end cost no
// WINDOW_UPDATE; their refunds accumulate until one is worth it.
func TestSmallAnswersNoWindowUpdate(t *testing.T) {
	leakcheck.Goroutines(t)
	updates := make(chan int, 20)
	addr := startRaw(t, func(rc *rawConn) {
		n := -1 // the client's first connection WINDOW_UPDATE opens its window
		rc.drain(func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.WindowUpdateFrame:
				n++
			case *http2.MetaHeadersFrame:
				updates <- n // those sent before this call
				rc.writeHeaders(f.StreamID, false, ":status", "200")
				rc.fr.WriteData(f.StreamID, false, make([]byte, 100))
				rc.writeHeaders(f.StreamID, true, "x-t", "1")
			}
		})
	})
	cc, _ := dial(t, addr, Options{})
	for i := range 10 {
		resp, err := cc.RoundTrip(simpleReq(context.Background(), addr))
		if err != nil {
			t.Fatal(err)
		}
		if n := <-updates; n != 0 {
			t.Fatalf("call %d: %d WINDOW_UPDATEs before it", i, n)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 100 {
			t.Fatalf("call %d: %d bytes, %v", i, len(b), err)
		}
		resp.Body.Close()
	}
}
