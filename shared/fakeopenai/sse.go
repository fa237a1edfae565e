package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
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

// Wire shapes of the Responses API. Structs rather than maps keep the key
// order stable, which the golden tests rely on.
type (
	wireResponse struct {
		ID     string     `json:"id"`
		Object string     `json:"object"`
		Status string     `json:"status"`
		Model  string     `json:"model"`
		Output []any      `json:"output"`
		Usage  *wireUsage `json:"usage,omitempty"`
	}
	wireUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	responseEvent struct {
		Type     string       `json:"type"`
		Response wireResponse `json:"response"`
	}
	itemEvent struct {
		Type        string `json:"type"`
		OutputIndex int    `json:"output_index"`
		Item        any    `json:"item"`
	}
	textDelta struct {
		Type         string `json:"type"`
		ItemID       string `json:"item_id"`
		OutputIndex  int    `json:"output_index"`
		ContentIndex int    `json:"content_index"`
		Delta        string `json:"delta"`
	}
	summaryPartAdded struct {
		Type         string      `json:"type"`
		ItemID       string      `json:"item_id"`
		OutputIndex  int         `json:"output_index"`
		SummaryIndex int         `json:"summary_index"`
		Part         summaryText `json:"part"`
	}
	summaryDelta struct {
		Type         string `json:"type"`
		ItemID       string `json:"item_id"`
		OutputIndex  int    `json:"output_index"`
		SummaryIndex int    `json:"summary_index"`
		Delta        string `json:"delta"`
	}
	summaryText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	wireMessage struct {
		Type    string       `json:"type"`
		ID      string       `json:"id"`
		Role    string       `json:"role"`
		Status  string       `json:"status"`
		Content []outputText `json:"content"`
	}
	outputText struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	}
	wireReasoning struct {
		Type    string        `json:"type"`
		ID      string        `json:"id"`
		Summary []summaryText `json:"summary"`
	}
	wireFunctionCall struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	wireCustomCall struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
		Input  string `json:"input"`
		Status string `json:"status"`
	}
	wireError struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
)

// errorBody returns the OpenAI error object {"error":{...}}.
func errorBody(status int, msg string) wireError {
	var e wireError
	e.Error.Type, e.Error.Code = errorCode(status)
	e.Error.Message = msg
	return e
}

func respID(seq int) string { return fmt.Sprintf("resp_fake_%03d", seq) }

// callItem returns the wire item of c, complete ("completed") or just
// announced ("in_progress"). suffix tells apart the default ids of the
// calls of one reply.
func (c *Call) callItem(seq int, suffix, status string) any {
	id := c.ID
	if id == "" {
		id = fmt.Sprintf("call_fake_%03d%s", seq, suffix)
	}
	itemID := fmt.Sprintf("fc_fake_%03d%s", seq, suffix)
	if c.Kind == "custom_tool_call" {
		it := wireCustomCall{Type: c.Kind, ID: itemID, CallID: id, Name: c.Name, Status: status}
		if status == "completed" {
			it.Input = c.Input
		}
		return it
	}
	it := wireFunctionCall{Type: "function_call", ID: itemID, CallID: id, Name: c.Name, Status: status}
	if status == "completed" {
		it.Arguments = c.Arguments
	}
	return it
}

// events returns the SSE events that stream r, and the index of the event
// before which r.Fault strikes (len(events) when there is no fault).
func (r Reply) events(seq int, model string) (evs []event, faultAt int) {
	resp := wireResponse{ID: respID(seq), Object: "response", Status: "in_progress", Model: model, Output: []any{}}
	evs = append(evs, event{name: "response.created", data: responseEvent{Type: "response.created", Response: resp}})
	faultAt = -1
	var output []any
	index := 0
	add := func(item, done any, deltas []event) {
		evs = append(evs, event{name: "response.output_item.added", data: itemEvent{Type: "response.output_item.added", OutputIndex: index, Item: item}})
		evs = append(evs, deltas...)
		evs = append(evs, event{name: "response.output_item.done", data: itemEvent{Type: "response.output_item.done", OutputIndex: index, Item: done}})
		output = append(output, done)
		index++
	}

	if r.Reasoning != "" {
		id := fmt.Sprintf("rs_fake_%03d", seq)
		ds := []event{{name: "response.reasoning_summary_part.added", data: summaryPartAdded{
			Type: "response.reasoning_summary_part.added", ItemID: id, OutputIndex: index, Part: summaryText{Type: "summary_text"},
		}}}
		for _, w := range splitWords(r.Reasoning) {
			ds = append(ds, event{name: "response.reasoning_summary_text.delta", data: summaryDelta{
				Type: "response.reasoning_summary_text.delta", ItemID: id, OutputIndex: index, Delta: w,
			}})
		}
		add(wireReasoning{Type: "reasoning", ID: id, Summary: []summaryText{}}, wireReasoning{
			Type: "reasoning", ID: id, Summary: []summaryText{{Type: "summary_text", Text: r.Reasoning}},
		}, ds)
	}
	if texts := r.TextDeltas(); len(texts) > 0 {
		id := fmt.Sprintf("msg_fake_%03d", seq)
		ds := make([]event, len(texts))
		for i, t := range texts {
			ds[i] = event{name: "response.output_text.delta", delay: r.Delay, data: textDelta{
				Type: "response.output_text.delta", ItemID: id, OutputIndex: index, Delta: t,
			}}
		}
		// The fault strikes after the first delta: the output_item.added
		// event and the created event come before it.
		faultAt = len(evs) + 2
		add(wireMessage{Type: "message", ID: id, Role: "assistant", Status: "in_progress", Content: []outputText{}},
			wireMessage{Type: "message", ID: id, Role: "assistant", Status: "completed", Content: []outputText{
				{Type: "output_text", Text: r.FullText(), Annotations: []any{}},
			}}, ds)
	}
	if r.Call != nil {
		add(r.Call.callItem(seq, "", "in_progress"), r.Call.callItem(seq, "", "completed"), nil)
	}
	for i, c := range r.Calls {
		suffix := fmt.Sprintf("_%d", i+1)
		add(c.callItem(seq, suffix, "in_progress"), c.callItem(seq, suffix, "completed"), nil)
	}

	u := r.usage()
	wu := &wireUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.Total()}
	wu.InputTokensDetails.CachedTokens = u.CachedTokens
	wu.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	done := wireResponse{ID: respID(seq), Object: "response", Status: "completed", Model: model, Output: output, Usage: wu}
	if done.Output == nil {
		done.Output = []any{}
	}
	evs = append(evs, event{name: "response.completed", data: responseEvent{Type: "response.completed", Response: done}})
	if faultAt < 0 {
		faultAt = 1 // right after response.created
	}
	if r.Fault == NoFault {
		faultAt = len(evs)
	}
	return evs, faultAt
}
