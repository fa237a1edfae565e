package acp

import (
	"context"
	"encoding/json"
	"fmt"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// client serves the agent's requests to the client side of ACP: session
// updates, permission requests, files and terminals.
type client struct{ c *conversation }

// SessionUpdate translates an update into output; updates of a session
// being loaded replay history the session already logged and are dropped.
func (cl *client) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loading || n.SessionId != c.sessionID {
		return nil
	}
	if evs := c.tr.update(n.Update); len(evs) > 0 {
		c.q.push(provider.Output{Events: evs})
	}
	return nil
}

// RequestPermission asks the session (its rules, else a user) whether a
// tool call may run, and waits for the answer.
func (cl *client) RequestPermission(ctx context.Context, req acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	c := cl.c
	tc := req.ToolCall
	c.mu.Lock()
	// The SDK runs each request of the agent on a goroutine of its own, so
	// this may run after the agent already withdrew the request, and even
	// after its turn ended (the agent's SDK sends $/cancel_request from a
	// goroutine of its own, so the withdrawal may arrive after the turn's
	// end). A request withdrawn before it was shown, or outside a turn, is
	// never shown: the check is under c.mu, which the turn's end takes too,
	// so an ask is pushed before its turn's end or not at all.
	if ctx.Err() != nil || !c.inTurn {
		c.mu.Unlock()
		return cancelledOutcome(), nil
	}
	ts := c.tr.tool(tc.ToolCallId)
	c.tr.merge(ts, tc.Kind, tc.Title, tc.RawInput, tc.Locations)
	evs := c.tr.announce(c.tr.flushThought(nil), tc.ToolCallId, ts)
	name, input, readOnly := c.tr.toolRequest(ts)
	c.nextAsk++
	id := fmt.Sprintf("%s%d", c.askPfx, c.nextAsk)
	ask := &openAsk{answer: make(chan provider.Answer, 1)}
	c.pending[id] = ask
	raw, err := json.Marshal(input)
	if err != nil {
		raw = []byte("{}")
	}
	evs = append(evs, &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{
		RequestId: id, ToolName: name, Description: ts.title, Input: toStruct(input), ToolUseId: string(tc.ToolCallId),
	}}})
	evs = c.tr.setStatus(evs, pb.AgentStatus_WAITING_FOR_USER, name)
	c.q.push(provider.Output{Events: evs, Permission: &provider.PermissionAsk{
		ID: id, Tool: name, ToolUseID: string(tc.ToolCallId), Input: raw, ReadOnly: readOnly,
	}})
	c.mu.Unlock()

	var a provider.Answer
	select {
	case a = <-ask.answer:
	case <-ctx.Done():
		// The agent withdrew the request, or the connection ended.
		c.mu.Lock()
		if c.pending[id] != nil {
			delete(c.pending, id)
			c.q.push(provider.Output{Withdrawn: id})
		}
		c.mu.Unlock()
		return cancelledOutcome(), nil
	}
	out := outcome(req.Options, a.Decision)
	c.mu.Lock()
	if out.Outcome.Selected != nil && allows(req.Options, out.Outcome.Selected.OptionId) {
		c.q.push(provider.Output{Events: c.tr.setStatus(nil, pb.AgentStatus_EXECUTING_TOOL, "")})
	} else {
		c.q.push(provider.Output{Events: c.tr.setStatus(nil, pb.AgentStatus_THINKING, "")})
	}
	c.mu.Unlock()
	if a.Decision == provider.Cancel {
		// Cancel ends the turn too.
		_ = c.conn.Cancel(c.ctx, acpsdk.CancelNotification{SessionId: c.sid()})
	}
	return out, nil
}

// outcome picks the option answering d: Allow the allow_once option,
// AllowForSession allow_always, Deny reject_once, each falling back to the
// other of its side; Cancel, or no option of the side, is "cancelled".
func outcome(opts []acpsdk.PermissionOption, d provider.Decision) acpsdk.RequestPermissionResponse {
	var kinds []acpsdk.PermissionOptionKind
	switch d {
	case provider.Allow:
		kinds = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways}
	case provider.AllowForSession:
		kinds = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowAlways, acpsdk.PermissionOptionKindAllowOnce}
	case provider.Deny:
		kinds = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways}
	}
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{
					Selected: &acpsdk.RequestPermissionOutcomeSelected{OptionId: o.OptionId},
				}}
			}
		}
	}
	return cancelledOutcome()
}

func cancelledOutcome() acpsdk.RequestPermissionResponse {
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}}
}

// allows reports whether option id allows the tool call.
func allows(opts []acpsdk.PermissionOption, id acpsdk.PermissionOptionId) bool {
	for _, o := range opts {
		if o.OptionId == id {
			return o.Kind == acpsdk.PermissionOptionKindAllowOnce || o.Kind == acpsdk.PermissionOptionKindAllowAlways
		}
	}
	return false
}

// ReadTextFile serves fs/read_text_file inside the working directory.
func (cl *client) ReadTextFile(_ context.Context, req acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	resp, err := readTextFile(cl.c.dir, req)
	if err != nil {
		cl.c.log.Info("acp: refused fs/read_text_file", "path", req.Path, "err", err)
	}
	return resp, err
}

// WriteTextFile serves fs/write_text_file inside the working directory.
func (cl *client) WriteTextFile(_ context.Context, req acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	resp, err := writeTextFile(cl.c.dir, req)
	if err != nil {
		cl.c.log.Info("acp: refused fs/write_text_file", "path", req.Path, "err", err)
	}
	return resp, err
}

// CreateTerminal serves terminal/create.
func (cl *client) CreateTerminal(_ context.Context, req acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return cl.c.terms.create(req)
}

// TerminalOutput serves terminal/output.
func (cl *client) TerminalOutput(_ context.Context, req acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return cl.c.terms.output(req.TerminalId)
}

// WaitForTerminalExit serves terminal/wait_for_exit.
func (cl *client) WaitForTerminalExit(ctx context.Context, req acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return cl.c.terms.waitForExit(ctx, req.TerminalId)
}

// KillTerminal serves terminal/kill.
func (cl *client) KillTerminal(_ context.Context, req acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, cl.c.terms.kill(req.TerminalId)
}

// ReleaseTerminal serves terminal/release.
func (cl *client) ReleaseTerminal(_ context.Context, req acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, cl.c.terms.release(req.TerminalId)
}

// HandleExtensionMethod handles the end-of-output marker; other extension
// methods are unknown.
func (cl *client) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method == eofMethod {
		var p struct {
			Nonce string `json:"nonce"`
		}
		if json.Unmarshal(params, &p) == nil && p.Nonce == cl.c.nonce {
			cl.c.drainOnce.Do(func() { close(cl.c.drained) })
			return nil, nil
		}
	}
	return nil, acpsdk.NewMethodNotFound(method)
}
