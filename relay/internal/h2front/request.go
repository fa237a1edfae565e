package h2front

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
)

// commonCanon maps frequent lowercase header names to canonical form
// without allocating.
var commonCanon = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Cache-Control", "Content-Encoding", "Content-Length", "Content-Type",
		"Cookie", "Date", "Etag", "Grpc-Accept-Encoding", "Grpc-Encoding",
		"Grpc-Message", "Grpc-Status", "Grpc-Timeout", "Host", "Origin",
		"Referer", "Te", "Trailer", "User-Agent", "Via", "X-Forwarded-For",
		"X-Forwarded-Proto", "X-Request-Id", "Traceparent", "Tracestate",
		"Grpc-Status-Details-Bin",
	} {
		m[strings.ToLower(k)] = k
	}
	return m
}()

// canonical returns the canonical form of the lowercase wire name v.
// Reader goroutine only.
func (c *conn) canonical(v string) string {
	if s, ok := commonCanon[v]; ok {
		return s
	}
	if s, ok := c.canonCache[v]; ok {
		return s
	}
	s := http.CanonicalHeaderKey(v)
	if len(c.canonCache) < canonCacheMax && len(v) < 64 {
		if c.canonCache == nil {
			c.canonCache = make(map[string]string)
		}
		c.canonCache[v] = s
	}
	return s
}

// connHeaders are connection-specific and invalid in HTTP/2.
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// newRequest builds the handler's request from a HEADERS block, applying
// net/http's HTTP/2 validation. ok=false is a malformed request (stream
// error PROTOCOL_ERROR). The framer has already rejected unknown,
// duplicate or misplaced pseudo-headers and invalid field names/values.
func (c *conn) newRequest(st *stream, f *http2.MetaHeadersFrame) (*http.Request, bool) {
	var method, path, scheme, authority string
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method":
			method = hf.Value
		case ":path":
			path = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":authority":
			authority = hf.Value
		default: // :protocol (extended CONNECT) and :status are not accepted
			return nil, false
		}
	}
	if method == "" || method == "CONNECT" || path == "" || (scheme != "https" && scheme != "http") {
		return nil, false
	}
	regular := f.RegularFields()
	header := make(http.Header, len(regular))
	var cookies []string
	for _, hf := range regular {
		if hf.Name == "cookie" {
			cookies = append(cookies, hf.Value)
			continue
		}
		k := c.canonical(hf.Name)
		header[k] = append(header[k], hf.Value)
	}
	if len(cookies) > 0 {
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if !validRequestHeaders(header) {
		return nil, false
	}
	if authority == "" {
		authority = header.Get("Host")
	}

	var u *url.URL
	var err error
	if method == "OPTIONS" && path == "*" {
		u = &url.URL{Path: "*"}
	} else if strings.HasPrefix(path, "/") {
		u, err = url.ParseRequestURI(path)
	} else {
		return nil, false
	}
	if err != nil {
		return nil, false
	}

	var trailer http.Header
	for _, v := range header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			switch k {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				// Bogus; ignored as net/http does.
			default:
				if k == "" {
					continue
				}
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[k] = nil
			}
		}
	}
	delete(header, "Trailer")

	// An unparsable content-length counts as 0, as in net/http; the
	// reader checks the DATA received against it (RFC 9113 §8.1.1).
	contentLength := int64(-1)
	if vv, ok := header["Content-Length"]; ok {
		contentLength = 0
		if cl, err := strconv.ParseUint(vv[0], 10, 63); err == nil {
			contentLength = int64(cl)
		}
	}
	if f.StreamEnded() {
		if contentLength > 0 {
			return nil, false // no DATA follows to meet it
		}
		contentLength = 0
	}
	req := &http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		ProtoMinor:    0,
		Header:        header,
		Body:          &st.body,
		ContentLength: contentLength,
		Host:          authority,
		RemoteAddr:    c.remoteAddr,
		RequestURI:    path,
		TLS:           c.tlsState,
		Trailer:       trailer,
	}
	return req.WithContext(st.ctx), true
}

// validRequestHeaders applies RFC 9113 §8.2.2: no connection-specific
// fields, and "te" only "trailers".
func validRequestHeaders(h http.Header) bool {
	for _, k := range connHeaders {
		if _, ok := h[k]; ok {
			return false
		}
	}
	te := h["Te"]
	return len(te) == 0 || (len(te) == 1 && (te[0] == "trailers" || te[0] == ""))
}
