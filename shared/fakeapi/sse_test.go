package fakeapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWriteEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   event
		want string
	}{
		{
			name: "message_stop",
			ev:   event{name: "message_stop", data: typeOnly{Type: "message_stop"}},
			want: "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		},
		{
			name: "text delta with newline stays on one data line",
			ev: event{name: "content_block_delta", data: blockDelta{
				Type: "content_block_delta", Index: 1, Delta: textDelta{Type: "text_delta", Text: "a\nb"},
			}},
			want: "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\\nb\"}}\n\n",
		},
		{
			name: "error",
			ev:   event{name: "error", data: errorBody("overloaded_error", "Overloaded")},
			want: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeEvent(&buf, tc.ev); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// renderEvents returns "name data" lines for the events of r.
func renderEvents(t *testing.T, r Reply) (lines []string, faultAt int) {
	t.Helper()
	evs, faultAt, err := r.events(7, "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		b, err := json.Marshal(ev.data)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, ev.name+" "+string(b))
	}
	return lines, faultAt
}

func TestReplyEvents(t *testing.T) {
	const (
		start = `message_start {"type":"message_start","message":{"id":"msg_fake_007","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`
		stop  = `message_stop {"type":"message_stop"}`
	)
	tests := []struct {
		name      string
		reply     Reply
		want      []string
		wantFault int // -1: len(want)
	}{
		{
			name:  "text split into words",
			reply: Reply{Text: "Hi there"},
			want: []string{
				start,
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`,
				stop,
			},
			wantFault: -1,
		},
		{
			name:  "thinking then tool use",
			reply: Reply{Thinking: "Hmm ok", ToolUse: &ToolUse{Name: "Bash", Input: map[string]string{"command": "echo hi"}}, OutputTokens: 5},
			want: []string{
				start,
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm"}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" ok"}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2lnbmF0dXJlLWZha2U="}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`content_block_start {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_fake_007_0","name":"Bash","input":{}}}`,
				`content_block_delta {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"echo hi\"}"}}`,
				`content_block_stop {"type":"content_block_stop","index":1}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}`,
				stop,
			},
			wantFault: -1,
		},
		{
			name:  "fault after first text delta",
			reply: Reply{Deltas: []string{"a", "b"}, Fault: ErrorEvent, StopReason: "max_tokens"},
			want: []string{
				start,
				`content_block_start {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`,
				`content_block_delta {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`,
				`content_block_stop {"type":"content_block_stop","index":0}`,
				`message_delta {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":20}}`,
				stop,
			},
			wantFault: 3,
		},
		{
			name:      "empty reply with fault strikes after message_start",
			reply:     Reply{Fault: Stall},
			want:      []string{start, `message_delta {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`, stop},
			wantFault: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, faultAt := renderEvents(t, tc.reply)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			want := tc.wantFault
			if want < 0 {
				want = len(tc.want)
			}
			if faultAt != want {
				t.Errorf("faultAt = %d, want %d", faultAt, want)
			}
		})
	}
}

func TestReplyEventsDelay(t *testing.T) {
	evs, _, err := Reply{Deltas: []string{"a", "b"}, Delay: time.Second}.events(1, "m")
	if err != nil {
		t.Fatal(err)
	}
	var delayed int
	for _, ev := range evs {
		if ev.delay == time.Second {
			delayed++
		}
	}
	if delayed != 2 {
		t.Errorf("%d delayed events, want one per text delta (2)", delayed)
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"Hello from the fake model.", []string{"Hello", " from", " the", " fake", " model."}},
		{"  lead and trail \n", []string{"  lead", " and", " trail \n"}},
		{"   ", []string{"   "}},
	}
	for _, tc := range tests {
		got := splitWords(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || strings.Join(got, "") != tc.in {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitRunes(t *testing.T) {
	got := splitRunes("héllo wörld", 4)
	want := []string{"héll", "o wö", "rld"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitRunes = %q, want %q", got, want)
	}
}
