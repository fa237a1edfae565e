package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// historyVersion is the version of the history file format.
const historyVersion = 1

// maxHistoryBytes bounds a history file read back.
const maxHistoryBytes = 64 << 20

// history is a conversation as the agent keeps it: the Responses API input
// of its next request. It is saved as <Home>/<id>.json after every turn so
// that a restarted agent resumes the conversation (the id is the
// conversation's resume id).
type history struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Model   string `json:"model,omitempty"`
	Items   []item `json:"items"`
}

// item is one input item: a message, a function call or its output.
type item struct {
	Type      string `json:"type"` // message | function_call | function_call_output
	Role      string `json:"role,omitempty"`
	Text      string `json:"text,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Output    string `json:"output,omitempty"`
	// Images are a user message's images, as data: or https: URLs.
	Images []string `json:"images,omitempty"`
}

// Item types.
const (
	itemMessage    = "message"
	itemCall       = "function_call"
	itemCallOutput = "function_call_output"
)

// idRE is what a conversation id (a file name under Home) may look like.
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// decodeHistory parses and checks a history file.
func decodeHistory(b []byte) (*history, error) {
	var h history
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("parse history: %w", err)
	}
	if h.Version != historyVersion {
		return nil, fmt.Errorf("history version %d, want %d", h.Version, historyVersion)
	}
	if !idRE.MatchString(h.ID) {
		return nil, fmt.Errorf("history id %q is not valid", h.ID)
	}
	for i, it := range h.Items {
		switch it.Type {
		case itemMessage:
			if it.Role != "user" && it.Role != "assistant" {
				return nil, fmt.Errorf("history item %d: message role %q", i, it.Role)
			}
		case itemCall, itemCallOutput:
			if it.CallID == "" {
				return nil, fmt.Errorf("history item %d: %s without call_id", i, it.Type)
			}
		default:
			return nil, fmt.Errorf("history item %d: unknown type %q", i, it.Type)
		}
	}
	return &h, nil
}

// historyPath is where conversation id is kept under home.
func historyPath(home, id string) string { return filepath.Join(home, id+".json") }

// loadHistory reads conversation id from home; a missing file is
// fs.ErrNotExist.
func loadHistory(home, id string) (*history, error) {
	if !idRE.MatchString(id) {
		return nil, fmt.Errorf("resume id %q is not an openai-api conversation id", id)
	}
	p := historyPath(home, id)
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxHistoryBytes {
		return nil, fmt.Errorf("history %s is larger than %d bytes", p, maxHistoryBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("read history %s: %w", p, err)
	}
	h, err := decodeHistory(b)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", p, err)
	}
	if h.ID != id {
		return nil, fmt.Errorf("history %s holds conversation %q", p, h.ID)
	}
	return h, nil
}

// save writes h to home atomically (a temporary file renamed over it).
func (h *history) save(home string) error {
	if home == "" {
		return nil
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	f, err := os.CreateTemp(home, "."+h.ID+".*.tmp")
	if err != nil {
		return fmt.Errorf("save history: %w", err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("save history %s: %w", h.ID, err)
	}
	if err := os.Rename(f.Name(), historyPath(home, h.ID)); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("save history %s: %w", h.ID, err)
	}
	return nil
}

// input returns the items as a Responses API input list.
func (h *history) input() responses.ResponseInputParam {
	out := make(responses.ResponseInputParam, 0, len(h.Items))
	for _, it := range h.Items {
		switch it.Type {
		case itemMessage:
			role := responses.EasyInputMessageRole(it.Role)
			if len(it.Images) == 0 {
				out = append(out, responses.ResponseInputItemParamOfMessage(it.Text, role))
				continue
			}
			parts := responses.ResponseInputMessageContentListParam{responses.ResponseInputContentParamOfInputText(it.Text)}
			for _, u := range it.Images {
				img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
				img.OfInputImage.ImageURL = openai.String(u)
				parts = append(parts, img)
			}
			out = append(out, responses.ResponseInputItemParamOfMessage(parts, role))
		case itemCall:
			out = append(out, responses.ResponseInputItemParamOfFunctionCall(it.Arguments, it.CallID, it.Name))
		case itemCallOutput:
			o := responses.ResponseInputItemParamOfFunctionCallOutput(it.Output)
			o.OfFunctionCallOutput.CallID = openai.String(it.CallID)
			out = append(out, o)
		}
	}
	return out
}
