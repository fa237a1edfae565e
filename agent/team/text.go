package team

import "unicode/utf8"

// MaxText is the most bytes of a teammate's output or prompt and a task's
// description the service returns.
const MaxText = 4 << 10

// head is s cut to at most n bytes, at a character boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// tail keeps the last MaxText bytes of a growing text (a teammate's output
// so far: its latest part is what it is doing now).
type tail struct{ buf []byte }

func (t *tail) write(s string) {
	t.buf = append(t.buf, s...)
	if len(t.buf) > 2*MaxText {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-MaxText:]...)
	}
}

func (t *tail) reset() { t.buf = t.buf[:0] }

// String returns at most the last MaxText bytes, from a character start.
func (t *tail) String() string {
	b := t.buf
	if len(b) > MaxText {
		b = b[len(b)-MaxText:]
	}
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return string(b)
}
