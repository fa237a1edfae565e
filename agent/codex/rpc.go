package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// RPCError is the error object of a JSON-RPC response.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("codex app-server error %d: %s", e.Code, e.Message)
}

// message is one line of the app-server protocol: JSON-RPC 2.0 without the
// "jsonrpc" member. A request has an id and a method, a notification a method
// only, a response an id and a result or an error.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

// kind is what a decoded line is.
type kind int

const (
	kindResponse     kind = iota + 1 // a reply to one of our requests
	kindNotification                 // a server notification
	kindRequest                      // a server-initiated request (approvals)
)

// maxLine bounds one protocol line; longer lines are dropped. Items carry
// whole command outputs and diffs, so it is generous.
const maxLine = 64 << 20

var errNotObject = errors.New("not a JSON object")

// decodeLine decodes one line of the app-server's stdout. It never panics:
// garbage gives an error, which the reader logs and skips, as the app-server
// does with garbage on its stdin.
func decodeLine(line []byte) (message, kind, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return message{}, 0, errNotObject
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, 0, fmt.Errorf("decode line: %w", err)
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		if _, err := requestID(m.ID); err != nil {
			return message{}, 0, err
		}
		return m, kindRequest, nil
	case m.Method != "":
		return m, kindNotification, nil
	case hasID && (m.Result != nil || m.Error != nil):
		if _, err := responseID(m.ID); err != nil {
			return message{}, 0, err
		}
		return m, kindResponse, nil
	case m.Error != nil:
		// The server answers some malformed requests with an error and no
		// id; nothing waits for it.
		return m, 0, fmt.Errorf("error without id: %w", m.Error)
	}
	return message{}, 0, errors.New("line is neither request, response nor notification")
}

// requestID validates a server request's id, an integer or a string.
func requestID(raw json.RawMessage) (string, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	return "", fmt.Errorf("request id %s is neither a number nor a string", clip(string(raw), 40))
}

// responseID returns the integer id of a response to one of our requests.
func responseID(raw json.RawMessage) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("response id %s is not an integer", clip(string(raw), 40))
	}
	return n, nil
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
