package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
)

// MaxLineBytes bounds one stdout line. Initialize replies are ~20 KB and tool
// results or subagent reports can be far larger; the 64 KB default of
// bufio.Scanner is not enough.
const MaxLineBytes = 64 << 20

// ErrClosed is returned when writing to a Conn whose stdin is closed.
var ErrClosed = errors.New("claude: connection closed")

// Conn speaks the stream-json protocol over a pair of pipes.
type Conn struct {
	log *slog.Logger

	wmu     sync.Mutex
	w       io.WriteCloser
	bw      *bufio.Writer
	wclosed bool

	r        *bufio.Reader
	badLines atomic.Int64
	nextID   atomic.Uint64
}

// requestIDPrefix starts the ids of the host's control requests.
const requestIDPrefix = "betcode_"

// NewConn wraps the CLI's stdin (w) and stdout (r).
func NewConn(w io.WriteCloser, r io.Reader, log *slog.Logger) *Conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conn{
		log: log,
		w:   w,
		bw:  bufio.NewWriterSize(w, 64<<10),
		// A pipe holds 64 KiB: a larger buffer would rarely fill, and
		// readLine joins the fragments of a longer line (up to
		// MaxLineBytes). With one Conn per running CLI, 1 MiB each was
		// most of what ten parallel subagents added to the agent's heap.
		r: bufio.NewReaderSize(r, 64<<10),
	}
}

// BadLines reports how many stdout lines could not be decoded.
func (c *Conn) BadLines() int64 { return c.badLines.Load() }

// Next returns the next decodable stdout line. Undecodable lines are counted,
// logged and skipped. It returns io.EOF when stdout ends.
func (c *Conn) Next() (*Envelope, error) {
	for {
		line, err := c.readLine()
		if len(line) > 0 {
			env, derr := DecodeLine(line)
			if derr == nil {
				return env, nil
			}
			n := c.badLines.Add(1)
			c.log.Warn("claude: skipping malformed stdout line", "err", derr, "bad_lines", n)
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine returns one line without its newline, as a fresh slice. Lines
// longer than MaxLineBytes are discarded (counted as bad) and reading goes on.
func (c *Conn) readLine() ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		frag, err := c.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > MaxLineBytes {
				tooLong = true
				buf = nil
			} else {
				buf = append(buf, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			n := c.badLines.Add(1)
			c.log.Warn("claude: skipping oversized stdout line", "limit_bytes", MaxLineBytes, "bad_lines", n)
			if err != nil {
				return nil, err
			}
			tooLong = false
			continue
		}
		buf = bytes.TrimSpace(buf) // also drops the "\r\n"
		return buf, err
	}
}

// write serialises v, a struct or map, as one line. json.Marshal escapes
// newlines inside strings and produces a valid object, so the line needs
// none of WriteLine's checks.
func (c *Conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode stdin line: %w", err)
	}
	return c.writeLine(b)
}

// WriteLine writes one already-encoded JSON object as a line after checking
// that it is a single valid JSON object. A line the CLI cannot parse kills it,
// so nothing unchecked is written.
func (c *Conn) WriteLine(b []byte) error {
	if !json.Valid(b) || len(b) == 0 || b[0] != '{' || bytes.IndexByte(b, '\n') >= 0 {
		return fmt.Errorf("refusing to write invalid stdin line %s", preview(b))
	}
	return c.writeLine(b)
}

// writeLine writes b, a single-line JSON object, and a newline.
func (c *Conn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return ErrClosed
	}
	c.bw.Write(b)
	c.bw.WriteByte('\n')
	if err := c.bw.Flush(); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	return nil
}

// CloseStdin closes the CLI's stdin. A running turn still finishes.
func (c *Conn) CloseStdin() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return nil
	}
	c.wclosed = true
	return c.w.Close()
}

// NewRequestID returns a request id unique within this Conn.
func (c *Conn) NewRequestID() string {
	return requestIDPrefix + strconv.FormatUint(c.nextID.Add(1), 10)
}

// UserContent is a user message: either Text or Blocks (Messages API content
// blocks such as text and image) must be set.
type UserContent struct {
	Text   string
	Blocks []map[string]any
}

type userLine struct {
	Type            string      `json:"type"`
	Message         userMessage `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
	UUID            string      `json:"uuid,omitempty"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// SendUser writes a user prompt. uuid is optional.
func (c *Conn) SendUser(content UserContent, uuid string) error {
	var body any
	switch {
	case len(content.Blocks) > 0:
		body = content.Blocks
	case content.Text != "":
		body = content.Text
	default:
		return errors.New("claude: empty user message")
	}
	return c.write(userLine{Type: TypeUser, Message: userMessage{Role: "user", Content: body}, UUID: uuid})
}

// SendControlRequest writes a host→CLI control request and returns its id.
// request must carry "subtype".
func (c *Conn) SendControlRequest(request map[string]any) (string, error) {
	if _, ok := request["subtype"].(string); !ok {
		return "", errors.New("claude: control request without subtype")
	}
	id := c.NewRequestID()
	return id, c.write(map[string]any{"type": TypeControlRequest, "request_id": id, "request": request})
}

// SendControlSuccess answers a CLI control request successfully.
func (c *Conn) SendControlSuccess(requestID string, response any) error {
	inner := map[string]any{"subtype": "success", "request_id": requestID}
	if response != nil {
		inner["response"] = response
	}
	return c.write(map[string]any{"type": TypeControlResponse, "response": inner})
}

// SendControlError answers a CLI control request with an error.
func (c *Conn) SendControlError(requestID, msg string) error {
	return c.write(map[string]any{"type": TypeControlResponse, "response": map[string]any{
		"subtype": "error", "request_id": requestID, "error": msg,
	}})
}

// Initialize sends the initialize control request.
func (c *Conn) Initialize() (string, error) {
	return c.SendControlRequest(map[string]any{"subtype": "initialize"})
}

// Interrupt asks the CLI to stop the running turn; it answers with a result.
func (c *Conn) Interrupt() (string, error) {
	return c.SendControlRequest(map[string]any{"subtype": "interrupt"})
}

// EndSession asks the CLI to abort any turn and exit.
func (c *Conn) EndSession() (string, error) {
	return c.SendControlRequest(map[string]any{"subtype": "end_session"})
}

// Drain reads and discards lines until EOF or ctx ends (e.g. so that a
// killed child can be waited for).
func (c *Conn) Drain(ctx context.Context) error {
	for ctx.Err() == nil {
		if _, err := c.Next(); err != nil {
			return err
		}
	}
	return ctx.Err()
}
