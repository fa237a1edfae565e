package openaiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Stop reasons of TurnComplete.
const (
	stopEndTurn   = "end_turn"
	stopCancelled = "cancelled"
	stopError     = "error"
	stopMaxTokens = "max_tokens"
	stopMaxTurns  = "max_turns"
)

// Error codes of the ErrorEvents of a turn.
const (
	// CodeAPIError is an error of the Responses API (HTTP status, failed
	// response, malformed or cut stream).
	CodeAPIError = "API_ERROR"
	// CodeRateLimited is an HTTP 429 left after the retries.
	CodeRateLimited = "RATE_LIMITED"
	// CodeConnection is an API that cannot be reached.
	CodeConnection = "API_UNREACHABLE"
)

// errIdle ends a stream that sent nothing for the idle timeout.
var errIdle = errors.New("stream idle")

// turnUsage sums the usage of a turn's responses.
type turnUsage struct {
	input, cached, output int64
}

// runTurn runs one turn: model requests and tool calls until the model
// answers without calling a tool, the turn is interrupted or fails.
func (c *conversation) runTurn(ctx context.Context, qt queuedTurn) {
	start := time.Now()
	c.hist.Items = append(c.hist.Items, turnMessage(qt.turn))
	var u turnUsage
	reason := stopCancelled
	var errEv *pb.AgentEvent
	if !qt.cancelled && ctx.Err() == nil {
		c.emit(provider.StatusEvent(pb.AgentStatus_THINKING, ""))
		reason, errEv = c.steps(ctx, &u)
	}
	if err := c.hist.save(c.home); err != nil {
		c.log.Error("openai-api: save conversation", "err", err)
	}
	var evs []*pb.AgentEvent
	if errEv != nil {
		evs = append(evs, errEv)
	}
	evs = append(evs,
		&pb.AgentEvent{Event: &pb.AgentEvent_Usage{Usage: &pb.UsageReport{
			InputTokens:     clamp(u.input - u.cached),
			CacheReadTokens: clamp(u.cached),
			OutputTokens:    clamp(u.output),
			Model:           c.model,
			DurationMs:      clamp(time.Since(start).Milliseconds()),
		}}},
		provider.TurnCompleteEvent(reason),
		provider.StatusEvent(pb.AgentStatus_IDLE, ""))
	c.out.push(provider.Output{Events: evs, TurnEnded: true})
}

// steps alternates model responses and tool calls.
func (c *conversation) steps(ctx context.Context, u *turnUsage) (string, *pb.AgentEvent) {
	for range c.maxSteps {
		res, err := c.respond(ctx, u)
		if ctx.Err() != nil {
			return stopCancelled, nil
		}
		if err != nil {
			c.mu.Lock()
			c.lastErr = err.Error()
			c.mu.Unlock()
			c.log.Warn("openai-api: model request failed", "err", err)
			return stopError, apiErrorEvent(err)
		}
		if res.text != "" {
			c.hist.Items = append(c.hist.Items, item{Type: itemMessage, Role: "assistant", Text: res.text})
		}
		for _, cl := range res.calls {
			c.hist.Items = append(c.hist.Items, item{Type: itemCall, CallID: cl.ID, Name: cl.Name, Arguments: string(cl.Args)})
		}
		if len(res.calls) == 0 {
			return res.stop, nil
		}
		for i, cl := range res.calls {
			output := canceledOutput
			if ctx.Err() == nil {
				var end bool
				output, end = c.runCall(ctx, cl)
				if end {
					// Cancel: the user ends the turn; the other calls do not run.
					for _, rest := range res.calls[i:] {
						o := canceledOutput
						if rest.ID == cl.ID {
							o = output
						}
						c.hist.Items = append(c.hist.Items, item{Type: itemCallOutput, CallID: rest.ID, Output: o})
					}
					return stopCancelled, nil
				}
			}
			c.hist.Items = append(c.hist.Items, item{Type: itemCallOutput, CallID: cl.ID, Output: output})
		}
		if ctx.Err() != nil {
			return stopCancelled, nil
		}
		c.emit(provider.StatusEvent(pb.AgentStatus_THINKING, ""))
	}
	return stopMaxTurns, provider.ErrorEvent(CodeAPIError, fmt.Sprintf("the model called tools %d times in one turn; the turn was stopped", c.maxSteps), false)
}

// canceledOutput is what the model is told of a call the user interrupted.
const canceledOutput = "The user interrupted the turn; the tool call did not complete."

// response is what one model response produced.
type response struct {
	text  string
	calls []call
	stop  string
}

// respond sends the conversation to the model and streams its answer.
func (c *conversation) respond(ctx context.Context, u *turnUsage) (response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.idleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()

	params := responses.ResponseNewParams{
		Model:        c.model,
		Instructions: openai.String(instructions(c.wd.dir)),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: c.hist.input()},
		Tools:        tools(),
		Store:        openai.Bool(false),
	}
	// The idle clock runs while an attempt waits for the API, not while
	// the SDK waits out a retry-after between attempts; a failed attempt
	// that will be retried is announced, so that a wait is explained.
	attempt := 0
	watch := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		attempt++
		idle.Reset(c.idleTimeout)
		res, err := next(req)
		if err != nil || res.StatusCode >= http.StatusBadRequest {
			idle.Stop()
			if why := retryable(res, err); why != "" && attempt <= c.retries && ctx.Err() == nil {
				c.emit(provider.StatusEvent(pb.AgentStatus_THINKING,
					fmt.Sprintf("retrying: %s (attempt %d of %d)", why, attempt+1, c.retries+1)))
			}
		}
		return res, err
	})
	stream := c.client.Responses.NewStreaming(ctx, params, watch)
	defer stream.Close()
	var res response
	var text strings.Builder
	streamed := false
	completed := false
	for stream.Next() {
		idle.Reset(c.idleTimeout)
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if ev.Delta != "" {
				streamed = true
				c.emit(provider.TextEvent(ev.Delta, false))
			}
		case "response.reasoning_summary_text.done":
			if ev.Text != "" {
				c.emit(provider.StatusEvent(pb.AgentStatus_THINKING, ev.Text))
			}
		case "response.output_item.done":
			it := ev.Item
			switch it.Type {
			case "message":
				var t strings.Builder
				for _, part := range it.Content {
					t.WriteString(part.Text)
				}
				full := t.String()
				text.WriteString(full)
				if !streamed {
					c.emit(provider.TextEvent(full, true))
				} else {
					c.emit(provider.TextEvent("", true))
				}
				streamed = false
			case "reasoning":
				var s []string
				for _, part := range it.Summary {
					s = append(s, part.Text)
				}
				if len(s) > 0 {
					c.emit(provider.StatusEvent(pb.AgentStatus_THINKING, strings.Join(s, "\n")))
				}
			case "function_call":
				id := it.CallID
				if id == "" {
					id = it.ID
				}
				res.calls = append(res.calls, parseCall(id, it.Name, it.Arguments.OfString))
			}
		case "response.completed", "response.incomplete":
			completed = true
			r := ev.Response
			u.input += r.Usage.InputTokens
			u.cached += r.Usage.InputTokensDetails.CachedTokens
			u.output += r.Usage.OutputTokens
			res.stop = stopEndTurn
			if ev.Type == "response.incomplete" {
				res.stop = stopMaxTokens
				if reason := r.IncompleteDetails.Reason; reason != "" && reason != "max_output_tokens" {
					return res, fmt.Errorf("the response is incomplete: %s", reason)
				}
			}
		case "response.failed":
			msg := ev.Response.Error.Message
			if msg == "" {
				msg = "the response failed"
			}
			return res, fmt.Errorf("%s (%s)", msg, ev.Response.Error.Code)
		case "error":
			return res, fmt.Errorf("%s (%s)", ev.Message, ev.Code)
		}
	}
	if err := stream.Err(); err != nil {
		if errors.Is(context.Cause(ctx), errIdle) {
			return res, fmt.Errorf("the API sent nothing for %s; the request was abandoned", c.idleTimeout)
		}
		return res, err
	}
	if !completed {
		return res, errors.New("the response stream ended before response.completed")
	}
	res.text = text.String()
	return res, nil
}

// retryable says why the SDK retries a failed attempt, "" when it does
// not: the statuses and connection errors of its retry policy.
func retryable(res *http.Response, err error) string {
	if res == nil {
		if err != nil {
			return "cannot reach the API"
		}
		return ""
	}
	if res.Header.Get("x-should-retry") == "false" {
		return ""
	}
	switch s := res.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= http.StatusInternalServerError:
		why := "HTTP " + strconv.Itoa(s)
		if ra := res.Header.Get("retry-after"); ra != "" {
			why += ", retry after " + ra + "s"
		}
		return why
	}
	return ""
}

// apiErrorEvent is the ErrorEvent of a failed model request.
func apiErrorEvent(err error) *pb.AgentEvent {
	var apiErr *openai.Error
	var netErr net.Error
	var opErr *net.OpError
	var syntaxErr *json.SyntaxError
	code, msg := CodeAPIError, "OpenAI API request failed: "+err.Error()
	switch {
	case errors.As(err, &apiErr):
		detail := apiErr.Message
		if detail == "" {
			detail = apiErr.Error()
		}
		msg = fmt.Sprintf("OpenAI API error: HTTP %d: %s", apiErr.StatusCode, detail)
		if apiErr.StatusCode == 429 {
			code = CodeRateLimited
			msg = "OpenAI API rate limit (HTTP 429) after retries: " + detail
		}
	case errors.As(err, &syntaxErr):
		msg = "OpenAI API sent a malformed event: " + err.Error()
	case errors.As(err, &opErr), errors.As(err, &netErr):
		code, msg = CodeConnection, "cannot reach the OpenAI API: "+err.Error()
	}
	return provider.ErrorEvent(code, msg, false)
}

// runCall announces, asks for and runs one tool call and returns what the
// model is told; end reports that the user cancelled the turn.
func (c *conversation) runCall(ctx context.Context, cl call) (output string, end bool) {
	start := time.Now()
	input := c.displayInput(cl)
	desc := cl.Name
	if cl.Input != nil {
		desc = cl.Input.description(cl.Name)
	}
	c.emit(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{
		ToolId: cl.ID, ToolName: cl.Name, Input: structOf(input), Description: desc,
	}}}, provider.StatusEvent(pb.AgentStatus_EXECUTING_TOOL, ""))
	result := func(out string, isErr bool) string {
		out = bound(out)
		c.emit(&pb.AgentEvent{Event: &pb.AgentEvent_ToolCallResult{ToolCallResult: &pb.ToolCallResult{
			ToolId: cl.ID, Output: out, IsError: isErr, DurationMs: clamp(time.Since(start).Milliseconds()),
		}}})
		if isErr {
			return "Error: " + out
		}
		return out
	}
	if cl.Err != nil {
		return result(cl.Err.Error(), true), false
	}
	// A path outside the working directory is refused before anyone is
	// asked: no answer could make it run.
	if p := cl.Input.path(cl.Name); p != "" {
		if _, err := c.wd.resolve(p); err != nil {
			return result(err.Error(), true), false
		}
	}
	a, err := c.ask(ctx, cl, input, desc)
	if err != nil {
		return result("interrupted before the tool ran", true), false
	}
	switch a.Decision {
	case provider.Deny, provider.Cancel:
		msg := "denied by the user"
		if a.Message != "" {
			msg = "denied: " + a.Message
		}
		return result(msg, true), a.Decision == provider.Cancel
	}
	c.emit(provider.StatusEvent(pb.AgentStatus_EXECUTING_TOOL, ""))
	in := cl.Input
	if len(a.Input) > 0 {
		edited := parseCall(cl.ID, cl.Name, string(a.Input))
		if edited.Err != nil {
			return result("the approved input is not valid: "+edited.Err.Error(), true), false
		}
		in = edited.Input
	}
	out, isErr := c.execute(ctx, cl.Name, in)
	return result(out, isErr), false
}

// execute runs an allowed tool call.
func (c *conversation) execute(ctx context.Context, tool string, in *toolInput) (string, bool) {
	var out string
	var err error
	switch tool {
	case ToolBash:
		return runCommand(ctx, c.wd.dir, in.Command, time.Duration(in.Timeout)*time.Millisecond, c.env)
	case ToolRead:
		out, err = c.wd.read(in)
	case ToolWrite:
		out, err = c.wd.write(in)
	case ToolEdit:
		out, err = c.wd.edit(in)
	case ToolLS:
		out, err = c.wd.list(in)
	case ToolGrep:
		out, err = c.wd.grep(in)
	default:
		err = fmt.Errorf("unknown tool %q", tool)
	}
	if err != nil {
		return err.Error(), true
	}
	return out, false
}

// ask hands the call to the session's permission engine and waits for the
// answer; an interrupt withdraws the request.
func (c *conversation) ask(ctx context.Context, cl call, input map[string]any, desc string) (provider.Answer, error) {
	id := "oai-" + uuid.NewString()
	ch := make(chan provider.Answer, 1)
	c.mu.Lock()
	c.asks[id] = ch
	c.mu.Unlock()
	raw, err := json.Marshal(input)
	if err != nil {
		raw = cl.Args
	}
	c.out.push(provider.Output{
		Events: []*pb.AgentEvent{
			{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
				RequestId: id, ToolName: cl.Name, Description: desc, Input: structOf(input), ToolUseId: cl.ID,
			}}},
			provider.StatusEvent(pb.AgentStatus_WAITING_FOR_USER, cl.Name),
		},
		Permission: &provider.PermissionAsk{ID: id, Tool: cl.Name, ToolUseID: cl.ID, Input: raw, ReadOnly: readOnly(cl.Name)},
	})
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		c.mu.Lock()
		_, open := c.asks[id]
		delete(c.asks, id)
		c.mu.Unlock()
		if open {
			c.out.push(provider.Output{Withdrawn: id})
		}
		return provider.Answer{}, ctx.Err()
	}
}

// displayInput is the call's input as rules and people see it: the
// model's arguments, with the path made absolute as Claude Code's are.
func (c *conversation) displayInput(cl call) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(cl.Args, &m); err != nil || m == nil {
		m = map[string]any{}
	}
	if cl.Input == nil {
		return m
	}
	switch cl.Name {
	case ToolRead, ToolWrite, ToolEdit:
		m["file_path"] = c.wd.abs(cl.Input.FilePath)
	case ToolLS, ToolGrep:
		m["path"] = c.wd.abs(cl.Input.path(cl.Name))
	}
	return m
}

// structOf converts a JSON object to a Struct; nil when it cannot.
func structOf(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}

// turnMessage is the history item of a turn: its text, or its content
// blocks (Anthropic Messages shape) as text and images; other blocks are
// named in the text.
func turnMessage(t provider.Turn) item {
	it := item{Type: itemMessage, Role: "user", Text: t.Text}
	if len(t.Blocks) == 0 {
		return it
	}
	var parts []string
	for _, b := range t.Blocks {
		switch b["type"] {
		case "text":
			if s, ok := b["text"].(string); ok {
				parts = append(parts, s)
			}
		case "image":
			if u := imageURL(b); u != "" {
				it.Images = append(it.Images, u)
				continue
			}
			parts = append(parts, "[an image in a form the openai-api provider cannot send was left out]")
		default:
			parts = append(parts, fmt.Sprintf("[a %v attachment was left out: the openai-api provider sends text and images only]", b["type"]))
		}
	}
	it.Text = strings.Join(parts, "\n")
	return it
}

// imageURL is the URL of an image block: a data: URL of base64 data, or
// the block's https URL; "" for another source.
func imageURL(b map[string]any) string {
	src, _ := b["source"].(map[string]any)
	switch src["type"] {
	case "base64":
		mt, _ := src["media_type"].(string)
		data, _ := src["data"].(string)
		if mt != "" && data != "" {
			return "data:" + mt + ";base64," + data
		}
	case "url":
		if u, _ := src["url"].(string); strings.HasPrefix(u, "https://") {
			return u
		}
	}
	return ""
}

// instructions is the system prompt.
func instructions(dir string) string {
	return "You are a coding agent working in the directory " + dir + ". " +
		"Use the tools to inspect and change the project: Read, Write, Edit, LS and Grep work on files inside that directory only " +
		"(paths relative to it, or absolute inside it); Bash runs a shell command there. " +
		"Every tool call may be refused by the user; when one is, do not retry it unchanged. " +
		"Answer concisely and say what you changed."
}

func clamp(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > int64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(n)
}
