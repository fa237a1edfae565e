package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/claude"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// StopReasonImported is the stop_reason of the TurnComplete that ends each
// imported exchange.
const StopReasonImported = "imported"

// MaxToolOutputBytes is how much of a tool result's text Import keeps.
const MaxToolOutputBytes = 64 << 10

// syntheticModel is the model name the CLI gives messages it makes up itself
// (API errors, "No response requested.").
const syntheticModel = "<synthetic>"

// Imported is a transcript converted to AgentEvents.
type Imported struct {
	Info  Info
	Model string // model of the last assistant message, "" if none
	// Events start with a SessionInfo; none has a sequence number, and
	// each carries the timestamp of the transcript entry it came from.
	Events []*pb.AgentEvent
	// BadLines counts lines skipped because they were not JSON entries or
	// were longer than MaxLineBytes.
	BadLines int
}

// Import reads the transcript at path and converts it as the package doc
// describes. It streams the file; only the events are held in memory.
func Import(path string) (Imported, error) {
	f, err := os.Open(path)
	if err != nil {
		return Imported{}, fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Imported{}, fmt.Errorf("stat transcript: %w", err)
	}
	c := newConverter()
	lr := newLineReader(f, 0)
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Imported{}, fmt.Errorf("read transcript %q: %w", path, err)
		}
		if len(line) > 0 {
			c.line(line)
		}
	}
	c.sum.badLines += lr.tooLong

	id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if _, err := uuid.Parse(id); err != nil {
		id = c.sessionID
	}
	info := c.sum.info(id, path, fi.ModTime())
	return Imported{Info: info, Model: c.model, Events: c.finish(info), BadLines: c.sum.badLines}, nil
}

// converter turns transcript entries into events, one entry at a time.
type converter struct {
	sum       summary
	events    []*pb.AgentEvent
	sessionID string // first sessionId seen
	model     string
	first     time.Time            // timestamp of the first entry that has one
	last      time.Time            // timestamp of the open exchange's last event
	open      bool                 // events were emitted since the last turn end
	tools     map[string]time.Time // announced tool id -> when it started
}

func newConverter() *converter { return &converter{tools: map[string]time.Time{}} }

// line converts one transcript line; an undecodable one is counted.
func (c *converter) line(b []byte) {
	e, err := decodeEntry(b)
	if err != nil {
		c.sum.badLines++
		return
	}
	c.entry(e)
}

func (c *converter) entry(e *entry) {
	if c.sessionID == "" {
		c.sessionID = e.SessionID
	}
	ts := e.time()
	if c.first.IsZero() {
		c.first = ts
	}
	if !e.mainThread() || (e.Type != typeUser && e.Type != typeAssistant) {
		return
	}
	blocks := e.blocks()
	c.sum.add(e, blocks)
	switch e.Type {
	case typeUser:
		if p, ok := e.prompt(blocks); ok {
			c.endTurn()
			c.emit(ts, &pb.AgentEvent{Event: &pb.AgentEvent_UserInput{UserInput: &pb.UserInputEvent{Content: p}}})
			c.emit(ts, bridge.StatusEvent(pb.AgentStatus_THINKING, ""))
			return
		}
		c.toolResults(ts, blocks)
	case typeAssistant:
		c.assistant(e, ts, blocks)
	}
}

func (c *converter) assistant(e *entry, ts time.Time, blocks []claude.ContentBlock) {
	if m := e.Message.Model; m != "" && m != syntheticModel {
		c.model = m
	}
	if e.APIError || e.APIErrorSnake {
		msg := assistantText(blocks)
		if msg == "" {
			msg = "model API call failed"
		}
		c.emit(ts, bridge.ErrorEvent(bridge.CodeAgentError, msg, false))
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text == "" {
				continue
			}
			c.emit(ts, &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: b.Text, IsComplete: true}}})
		case "tool_use":
			if b.ID == "" {
				continue
			}
			if _, seen := c.tools[b.ID]; seen {
				continue
			}
			c.tools[b.ID] = ts
			c.emit(ts, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{
				ToolId: b.ID, ToolName: b.Name, Input: bridge.ToStruct(b.Input), Description: description(b.Input),
			}}})
		}
	}
}

func (c *converter) toolResults(ts time.Time, blocks []claude.ContentBlock) {
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		var dur uint32
		if start, ok := c.tools[b.ToolUseID]; ok && !start.IsZero() && ts.After(start) {
			dur = uint32(min(ts.Sub(start).Milliseconds(), 1<<32-1))
		}
		c.emit(ts, &pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{
			ToolId: b.ToolUseID, Output: toolOutput(b.Content), IsError: b.IsError, DurationMs: dur,
		}}})
	}
}

// emit appends ev stamped with ts (left unset when the entry had none).
func (c *converter) emit(ts time.Time, ev *pb.AgentEvent) {
	if !ts.IsZero() {
		ev.Timestamp = timestamppb.New(ts)
		c.last = ts
	}
	c.events = append(c.events, ev)
	c.open = true
}

// endTurn closes the open exchange, if any.
func (c *converter) endTurn() {
	if !c.open {
		return
	}
	for _, ev := range []*pb.AgentEvent{bridge.TurnCompleteEvent(StopReasonImported), bridge.StatusEvent(pb.AgentStatus_IDLE, "")} {
		if !c.last.IsZero() {
			ev.Timestamp = timestamppb.New(c.last)
		}
		c.events = append(c.events, ev)
	}
	c.open = false
}

// finish closes the last exchange and puts the SessionInfo first.
func (c *converter) finish(info Info) []*pb.AgentEvent {
	c.endTurn()
	si := &pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{SessionInfo: &pb.SessionInfo{
		SessionId:        info.SessionID,
		Model:            c.model,
		WorkingDirectory: info.WorkingDirectory,
		MessageCount:     uint64(info.MessageCount),
		IsResumed:        true,
	}}}
	if !c.first.IsZero() {
		si.Timestamp = timestamppb.New(c.first)
	}
	return append([]*pb.AgentEvent{si}, c.events...)
}

// description is a tool input's "description" field, which Bash and Agent
// calls carry.
func description(input json.RawMessage) string {
	var in struct {
		Description string `json:"description"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	return in.Description
}

// toolOutput flattens a tool_result's content to valid UTF-8 of at most
// MaxToolOutputBytes (plus a note saying how much was cut).
func toolOutput(content json.RawMessage) string {
	s := strings.ToValidUTF8(claude.ToolResultText(content), "\uFFFD")
	if len(s) <= MaxToolOutputBytes {
		return s
	}
	cut := MaxToolOutputBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s\n… [%d more bytes not imported]", s[:cut], len(s)-cut)
}
