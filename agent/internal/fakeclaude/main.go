// Command fakeclaude imitates the Claude Code CLI's stream-json mode for the
// cases the real CLI cannot be made to show: crashing mid-turn, writing
// garbage, hanging, or flooding text deltas as fast as possible. Tests use
// the real CLI for everything else.
//
// The prompt picks the behaviour:
//
//	CRASH      a few deltas, then exit 3 mid-turn (stderr says why)
//	GARBAGE    malformed lines mixed into a normal answer
//	HANG       start the turn, then never finish (until killed or interrupted)
//	FLOOD n    n text deltas, then a normal end of turn
//	anything   a short answer
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/betcode-dev/betcode/shared/claudecli"
)

var (
	out       = bufio.NewWriterSize(os.Stdout, 1<<16)
	outMu     sync.Mutex
	sessionID = "00000000-0000-0000-0000-000000000000"
)

func emit(v any) {
	b, _ := json.Marshal(v)
	outMu.Lock()
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
	outMu.Unlock()
}

func raw(s string) {
	outMu.Lock()
	out.WriteString(s + "\n")
	out.Flush()
	outMu.Unlock()
}

func main() {
	args := os.Args[1:]
	for i, a := range args {
		switch a {
		case "--version":
			fmt.Println(claudecli.Version + " (Fake Claude Code)")
			return
		case "--session-id", "--resume":
			if i+1 < len(args) {
				sessionID = args[i+1]
			}
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	interrupted := make(chan struct{}, 1)
	turns := make(chan string, 16)
	go func() {
		for p := range turns {
			turn(p, interrupted)
		}
		os.Exit(0)
	}()
	for in.Scan() {
		var msg struct {
			Type      string          `json:"type"`
			RequestID string          `json:"request_id"`
			Request   json.RawMessage `json:"request"`
			Message   struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(in.Bytes(), &msg); err != nil {
			fmt.Fprintf(os.Stderr, "Error parsing streaming input line: %v\n", err)
			os.Exit(1)
		}
		switch msg.Type {
		case "control_request":
			var r struct {
				Subtype string `json:"subtype"`
			}
			_ = json.Unmarshal(msg.Request, &r)
			emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": msg.RequestID}})
			switch r.Subtype {
			case "interrupt":
				select {
				case interrupted <- struct{}{}:
				default:
				}
			case "end_session":
				os.Exit(0)
			}
		case "user":
			var text string
			if json.Unmarshal(msg.Message.Content, &text) != nil {
				text = string(msg.Message.Content)
			}
			turns <- text
		}
	}
	close(turns)
	select {}
}

func streamEvent(ev map[string]any) {
	emit(map[string]any{"type": "stream_event", "event": ev, "session_id": sessionID, "parent_tool_use_id": nil})
}

func delta(text string) {
	streamEvent(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
}

func turn(prompt string, interrupted chan struct{}) {
	select {
	case <-interrupted:
	default:
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": sessionID, "model": "fake-model", "cwd": "."})
	streamEvent(map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "model": "fake-model"}})
	streamEvent(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	fields := strings.Fields(prompt)
	text := "Fake answer."
	switch {
	case strings.Contains(prompt, "CRASH"):
		delta("about to ")
		delta("crash")
		fmt.Fprintln(os.Stderr, "fakeclaude: simulated crash")
		os.Exit(3)
	case strings.Contains(prompt, "HANG"):
		delta("hanging")
		<-interrupted
		emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "terminal_reason": "aborted_streaming", "session_id": sessionID, "usage": map[string]any{}})
		return
	case strings.Contains(prompt, "GARBAGE"):
		raw("this is not json")
		raw(`{"type": "stream_event", "event": `)
		raw(`[1,2,3]`)
		raw(`{"type":"mystery_type","x":1}`)
		delta("survived ")
		delta("garbage")
		text = "survived garbage"
	case len(fields) == 2 && fields[0] == "FLOOD":
		n, _ := strconv.Atoi(fields[1])
		for i := 0; i < n; i++ {
			delta("x")
		}
		text = strings.Repeat("x", n)
	default:
		delta(text)
	}
	streamEvent(map[string]any{"type": "content_block_stop", "index": 0})
	emit(map[string]any{"type": "assistant", "session_id": sessionID, "parent_tool_use_id": nil,
		"message": map[string]any{"id": "msg_1", "role": "assistant", "model": "fake-model", "content": []any{map[string]any{"type": "text", "text": text}}}})
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": text, "stop_reason": "end_turn",
		"session_id": sessionID, "total_cost_usd": 0.001, "duration_ms": 5,
		"usage":                         map[string]any{"input_tokens": 10, "output_tokens": 5},
		"model_usage_since_last_result": map[string]any{"fake-model": map[string]any{"costUSD": 0.001}}})
}
