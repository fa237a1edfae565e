package h2front

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/betcode-dev/betcode/shared/leakcheck"
)

// h2Client returns a net/http client speaking only HTTP/2.
func h2Client(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: clientTLS(), Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestResponseHeadersAndTrailers(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Trailer", "X-Declared, X-Unset")
		h.Set("Connection", "close")
		h.Set("X-Normal", "1")
		h.Set("X-Declared", "early") // a declared key is not a header
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "body")
		h.Set("X-Declared", "d")
		h.Set(http.TrailerPrefix+"X-Late", "l")
	}), nil)
	resp, err := h2Client(t).Get("https://" + ts.addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusAccepted || string(body) != "body" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Normal") != "1" || resp.Header.Get("Connection") != "" ||
		resp.Header.Get("X-Declared") != "" || resp.Header.Get("Date") != "" {
		t.Fatalf("headers %v", resp.Header)
	}
	if resp.Trailer.Get("X-Declared") != "d" || resp.Trailer.Get("X-Late") != "l" || len(resp.Trailer["X-Unset"]) != 0 {
		t.Fatalf("trailers %v", resp.Trailer)
	}
}

// TestTrailersWithoutBody: headers first sent at handler end, followed by
// a trailer block naming each declared key once.
func TestTrailersWithoutBody(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		w.Header().Set("X-T", "v")
	}), nil)
	rc := dialRaw(t, ts.addr)
	rc.handshake()
	rc.writeHeaders(1, true, rc.headerBlock("/"))
	rc.flush()
	var blocks []*http2.MetaHeadersFrame
	for len(blocks) < 2 {
		if mh, ok := rc.read().(*http2.MetaHeadersFrame); ok && mh.StreamID == 1 {
			blocks = append(blocks, mh)
		}
	}
	if blocks[0].StreamEnded() || headerValue(blocks[0], "x-t") != "" {
		t.Fatalf("headers %v", blocks[0].Fields)
	}
	if !blocks[1].StreamEnded() || len(blocks[1].Fields) != 1 || headerValue(blocks[1], "x-t") != "v" {
		t.Fatalf("trailers %v", blocks[1].Fields)
	}
}

// TestUnreadBodyRefundsConnWindow: bodies a handler never reads are
// refunded to the connection window, so later requests are not starved.
func TestUnreadBodyRefundsConnWindow(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ignored")
	}), nil)
	client := h2Client(t)
	payload := bytes.Repeat([]byte{'z'}, 600<<10)
	for i := range 6 {
		resp, err := client.Post("https://"+ts.addr+"/u", "application/octet-stream", bytes.NewReader(payload))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != "ignored" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
}

// TestRequestBodyRead: a handler reading a large body in small pieces
// (refunds batched per half window) sees every byte.
func TestRequestBodyRead(t *testing.T) {
	leakcheck.Goroutines(t)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.CopyBuffer(io.Discard, r.Body, make([]byte, 1000))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_, _ = io.WriteString(w, strings.Repeat("n", int(n%7))+"|"+r.Header.Get("Cookie"))
	}), nil)
	req, _ := http.NewRequest("POST", "https://"+ts.addr+"/r", bytes.NewReader(make([]byte, 5<<20+3)))
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	resp, err := h2Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	want := strings.Repeat("n", (5<<20+3)%7) + "|a=1; b=2"
	if string(b) != want {
		t.Fatalf("got %q want %q", b, want)
	}
}
