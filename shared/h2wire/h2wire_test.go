package h2wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

func TestRefundDue(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		unsent, avail, batch int64
		want                 bool
	}{
		{"nothing owed", 0, 0, 0, false},
		{"a small unary request", 100, 1 << 20, 0, false},
		{"MinRefund owed", MinRefund, 1 << 20, 0, true},
		{"the peer's window nearly gone", 100, 50, 0, true},
		{"doubles the window", 100, 100, 0, true},
		{"MinRefund owed, a stream batching 256 KiB", MinRefund, 1 << 20, 256 << 10, false},
		{"a stream's batch owed", 256 << 10, 768 << 10, 256 << 10, true},
		{"a batching stream's peer nearly out of window", 8 << 10, 4 << 10, 256 << 10, true},
		{"a batch under MinRefund is MinRefund", 1 << 10, 1 << 20, 1 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RefundDue(tc.unsent, tc.avail, tc.batch); got != tc.want {
				t.Fatalf("RefundDue(%d, %d, %d) = %v; want %v", tc.unsent, tc.avail, tc.batch, got, tc.want)
			}
		})
	}
}

func TestCheckSettings(t *testing.T) {
	settings := func(ss ...http2.Setting) *http2.SettingsFrame {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, &buf)
		if err := fr.WriteSettings(ss...); err != nil {
			t.Fatal(err)
		}
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		return f.(*http2.SettingsFrame)
	}
	many := make([]http2.Setting, MaxSettings+1)
	for i := range many {
		many[i] = http2.Setting{ID: http2.SettingID(100 + i), Val: 1} // unknown ids: no duplicates
	}
	for _, tc := range []struct {
		name string
		f    *http2.SettingsFrame
		ok   bool
	}{
		{"usual", settings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14}), true},
		{"empty", settings(), true},
		{"a setting twice", settings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 2}), false},
		{"more than MaxSettings", settings(many...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckSettings(tc.f); (err == nil) != tc.ok {
				t.Fatalf("CheckSettings: %v; want ok %v", err, tc.ok)
			}
		})
	}
}

// A FrameReader passes at most Limit bytes per ReadFrame, then fails with
// ErrFrameBytes until Reset.
func TestFrameReader(t *testing.T) {
	r := &FrameReader{R: strings.NewReader(strings.Repeat("x", 100)), Limit: 30}
	got, err := io.ReadAll(r)
	if len(got) != 30 || !errors.Is(err, ErrFrameBytes) {
		t.Fatalf("read %d bytes, then %v; want 30 and ErrFrameBytes", len(got), err)
	}
	r.Reset()
	if n, err := r.Read(make([]byte, 100)); n != 30 || err != nil {
		t.Fatalf("after Reset: %d, %v; want 30 bytes", n, err)
	}
}
