package fakeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// event is one server-sent event: a name and a JSON payload, sent after
// waiting delay.
type event struct {
	name  string
	data  any
	delay time.Duration
}

// writeEvent writes ev as an SSE frame: "event: NAME\ndata: JSON\n\n".
func writeEvent(w io.Writer, ev event) error {
	data, err := json.Marshal(ev.data)
	if err != nil {
		return fmt.Errorf("marshal %s event: %w", ev.name, err)
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
	return err
}

// Wire shapes of the Messages API. Structs rather than maps keep the key
// order stable, which the golden tests rely on.
type (
	wireUsage struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	}
	wireMessage struct {
		ID           string    `json:"id"`
		Type         string    `json:"type"`
		Role         string    `json:"role"`
		Model        string    `json:"model"`
		Content      []any     `json:"content"`
		StopReason   *string   `json:"stop_reason"`
		StopSequence *string   `json:"stop_sequence"`
		Usage        wireUsage `json:"usage"`
	}
	wireText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	wireThinking struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	wireToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	messageStart struct {
		Type    string      `json:"type"`
		Message wireMessage `json:"message"`
	}
	blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingDelta struct {
		Type     string `json:"type"`
		Thinking string `json:"thinking"`
	}
	signatureDelta struct {
		Type      string `json:"type"`
		Signature string `json:"signature"`
	}
	inputJSONDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	messageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	typeOnly struct {
		Type string `json:"type"`
	}
	wireError struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// errorBody returns the Anthropic error object {"type":"error","error":{...}}.
func errorBody(typ, msg string) wireError {
	var e wireError
	e.Type = "error"
	e.Error.Type = typ
	e.Error.Message = msg
	return e
}

// stopReason returns the stop reason r ends with.
func (r Reply) stopReason() string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case r.ToolUse != nil:
		return "tool_use"
	}
	return "end_turn"
}

func (r Reply) usage() (in, out int) {
	in, out = r.InputTokens, r.OutputTokens
	if in == 0 {
		in = defaultInputTokens
	}
	if out == 0 {
		out = defaultOutputTokens
	}
	return in, out
}

// toolInput returns the tool input as JSON ({} when nil).
func (t *ToolUse) toolInput() (json.RawMessage, error) {
	if t.Input == nil {
		return json.RawMessage(`{}`), nil
	}
	if raw, ok := t.Input.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(t.Input)
	if err != nil {
		return nil, fmt.Errorf("marshal input of tool %s: %w", t.Name, err)
	}
	return b, nil
}

func toolID(t *ToolUse, msgNum int) string {
	if t.ID != "" {
		return t.ID
	}
	return fmt.Sprintf("toolu_fake_%03d_0", msgNum)
}

func msgID(msgNum int) string { return fmt.Sprintf("msg_fake_%03d", msgNum) }

// message returns r as a complete non-streaming Messages API response.
func (r Reply) message(msgNum int, model string) (wireMessage, error) {
	in, out := r.usage()
	stop := r.stopReason()
	m := wireMessage{
		ID: msgID(msgNum), Type: "message", Role: "assistant", Model: model,
		Content:    []any{},
		StopReason: &stop,
		Usage:      wireUsage{InputTokens: in, OutputTokens: out},
	}
	if r.Thinking != "" {
		m.Content = append(m.Content, wireThinking{Type: "thinking", Thinking: r.Thinking, Signature: fakeSignature})
	}
	if text := r.FullText(); text != "" {
		m.Content = append(m.Content, wireText{Type: "text", Text: text})
	}
	if r.ToolUse != nil {
		input, err := r.ToolUse.toolInput()
		if err != nil {
			return wireMessage{}, err
		}
		m.Content = append(m.Content, wireToolUse{Type: "tool_use", ID: toolID(r.ToolUse, msgNum), Name: r.ToolUse.Name, Input: input})
	}
	return m, nil
}

// events returns the SSE events that stream r, and the index of the event
// before which r.Fault strikes (len(events) when there is no fault).
func (r Reply) events(msgNum int, model string) (evs []event, faultAt int, err error) {
	in, out := r.usage()
	start := messageStart{Type: "message_start", Message: wireMessage{
		ID: msgID(msgNum), Type: "message", Role: "assistant", Model: model,
		Content: []any{},
		Usage:   wireUsage{InputTokens: in, OutputTokens: 1},
	}}
	evs = append(evs, event{name: "message_start", data: start})
	faultAt = -1
	index := 0
	block := func(start any, deltas []any, delay time.Duration, faultAfterFirst bool) {
		evs = append(evs, event{name: "content_block_start", data: blockStart{Type: "content_block_start", Index: index, ContentBlock: start}})
		for i, d := range deltas {
			evs = append(evs, event{name: "content_block_delta", data: blockDelta{Type: "content_block_delta", Index: index, Delta: d}, delay: delay})
			if i == 0 && faultAfterFirst && faultAt < 0 {
				faultAt = len(evs)
			}
		}
		evs = append(evs, event{name: "content_block_stop", data: blockStop{Type: "content_block_stop", Index: index}})
		index++
	}

	if r.Thinking != "" {
		var ds []any
		for _, w := range splitWords(r.Thinking) {
			ds = append(ds, thinkingDelta{Type: "thinking_delta", Thinking: w})
		}
		ds = append(ds, signatureDelta{Type: "signature_delta", Signature: fakeSignature})
		block(wireThinking{Type: "thinking"}, ds, 0, false)
	}
	if texts := r.TextDeltas(); len(texts) > 0 {
		ds := make([]any, len(texts))
		for i, t := range texts {
			ds[i] = textDelta{Type: "text_delta", Text: t}
		}
		block(wireText{Type: "text"}, ds, r.Delay, true)
	}
	if r.ToolUse != nil {
		input, err := r.ToolUse.toolInput()
		if err != nil {
			return nil, 0, err
		}
		var ds []any
		for _, chunk := range splitRunes(string(input), 32) {
			ds = append(ds, inputJSONDelta{Type: "input_json_delta", PartialJSON: chunk})
		}
		block(wireToolUse{Type: "tool_use", ID: toolID(r.ToolUse, msgNum), Name: r.ToolUse.Name, Input: json.RawMessage(`{}`)}, ds, 0, false)
	}

	md := messageDelta{Type: "message_delta"}
	md.Delta.StopReason = r.stopReason()
	md.Usage.OutputTokens = out
	evs = append(evs,
		event{name: "message_delta", data: md},
		event{name: "message_stop", data: typeOnly{Type: "message_stop"}},
	)
	if faultAt < 0 {
		faultAt = 1 // right after message_start
	}
	if r.Fault == NoFault {
		faultAt = len(evs)
	}
	return evs, faultAt, nil
}

// splitRunes cuts s into pieces of at most n runes, never inside a rune.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
