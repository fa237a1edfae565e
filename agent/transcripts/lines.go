package transcripts

import (
	"bufio"
	"bytes"
	"io"
)

// MaxLineBytes is the longest transcript line read; longer lines (a tool
// result holding a huge file, say) are skipped and counted as bad.
const MaxLineBytes = 64 << 20

// lineReader yields the lines of a transcript one at a time, with the offset
// just past each, reusing one buffer.
type lineReader struct {
	r        *bufio.Reader
	buf      []byte
	offset   int64 // bytes consumed so far
	tooLong  int   // oversized lines skipped
	complete bool  // the last line returned ended with '\n'
}

func newLineReader(r io.Reader, offset int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20), offset: offset}
}

// next returns the next line without its line ending; the slice is valid
// until the next call. A last line without a newline is returned too, with
// complete false (the CLI may still be writing it). At the end of the input
// it returns io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	tooLong := false
	for {
		frag, err := l.r.ReadSlice('\n')
		l.offset += int64(len(frag))
		if !tooLong {
			if len(l.buf)+len(frag) > MaxLineBytes {
				tooLong = true
				l.buf = l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			l.tooLong++
			if err != nil {
				return nil, err
			}
			tooLong = false
			continue
		}
		if err != nil && (err != io.EOF || len(l.buf) == 0) {
			return nil, err
		}
		// A last line without a newline is returned now; the next call
		// reads EOF again and returns it.
		l.complete = err == nil
		return bytes.TrimSpace(l.buf), nil
	}
}
