package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Event is one thing the app-server reported, decoded. The concrete types
// are the pointers below; Client.Events delivers them in the order the
// app-server wrote them, and *Exited last.
type Event interface{ isEvent() }

// TurnStarted reports turn/started.
type TurnStarted struct {
	ThreadID string
	Turn     Turn
}

// TurnEnded reports turn/completed: Turn.Status is completed, interrupted
// or failed (then Turn.Error says why).
type TurnEnded struct {
	ThreadID string
	Turn     Turn
}

// ItemStarted reports item/started.
type ItemStarted struct {
	ThreadID, TurnID string
	Item             Item
}

// ItemCompleted reports item/completed; Item holds the final text, output
// or status.
type ItemCompleted struct {
	ThreadID, TurnID string
	Item             Item
}

// AgentMessageDelta is a chunk of the assistant's text
// (item/agentMessage/delta).
type AgentMessageDelta struct{ DeltaNotification }

// ReasoningDelta is a chunk of the model's reasoning summary
// (item/reasoning/summaryTextDelta) or raw reasoning
// (item/reasoning/textDelta, when Raw).
type ReasoningDelta struct {
	DeltaNotification
	Raw bool
}

// CommandOutputDelta is a chunk of a command's output
// (item/commandExecution/outputDelta). Codex may leave out the first chunk:
// the completed item's AggregatedOutput is authoritative.
type CommandOutputDelta struct{ DeltaNotification }

// TokenUsage reports thread/tokenUsage/updated, sent after every model
// request.
type TokenUsage struct{ TokenUsageNotification }

// Error reports the error notification: a model request failed.
type Error struct{ ErrorNotification }

// RequestResolved reports serverRequest/resolved: the approval with this
// ID was answered or withdrawn (e.g. by an interrupt).
type RequestResolved struct {
	ThreadID string
	// ApprovalID is the Approval.ID of the request.
	ApprovalID string
}

// Notification is any other notification, undecoded.
type Notification struct {
	Method string
	Params json.RawMessage
}

// Exited is the last event: the app-server process ended. Err is nil when
// Close ended it; otherwise it says how it died and carries the end of its
// stderr.
type Exited struct{ Err error }

func (*TurnStarted) isEvent()        {}
func (*TurnEnded) isEvent()          {}
func (*ItemStarted) isEvent()        {}
func (*ItemCompleted) isEvent()      {}
func (*AgentMessageDelta) isEvent()  {}
func (*ReasoningDelta) isEvent()     {}
func (*CommandOutputDelta) isEvent() {}
func (*TokenUsage) isEvent()         {}
func (*Error) isEvent()              {}
func (*RequestResolved) isEvent()    {}
func (*Notification) isEvent()       {}
func (*Exited) isEvent()             {}
func (*Approval) isEvent()           {}

// ApprovalKind says what an approval request is about.
type ApprovalKind string

// Kinds of approval requests.
const (
	ApprovalCommand    ApprovalKind = "command"
	ApprovalFileChange ApprovalKind = "fileChange"
)

// Decision answers an approval request.
type Decision string

// Decisions of the app-server protocol. The schema test checks them against
// CommandExecutionApprovalDecision and FileChangeApprovalDecision.
const (
	// Accept runs the command or applies the patch.
	Accept Decision = "accept"
	// AcceptForSession also accepts the same command (or changes to the
	// same files) for the rest of the thread without asking again.
	AcceptForSession Decision = "acceptForSession"
	// Decline refuses; the model is told and the turn continues.
	Decline Decision = "decline"
	// Cancel refuses and interrupts the turn.
	Cancel Decision = "cancel"
)

// DecisionFor maps a BetCode permission decision to a Codex decision:
// ALLOW_ONCE to Accept, ALLOW_SESSION to AcceptForSession, DENY (and
// anything else) to Decline. A cancelled turn answers its pending approvals
// with Cancel.
func DecisionFor(d pb.PermissionDecision) Decision {
	switch d {
	case pb.PermissionDecision_ALLOW_ONCE:
		return Accept
	case pb.PermissionDecision_ALLOW_SESSION:
		return AcceptForSession
	}
	return Decline
}

// Approval is a server-initiated request for permission to run a command or
// apply a patch. It waits, with no timeout, until Reply is called, the turn
// is interrupted or the process ends.
type Approval struct {
	Kind             ApprovalKind
	ThreadID, TurnID string
	// ItemID is the commandExecution or fileChange item announced just
	// before (by ItemStarted), which holds the command or the changes.
	ItemID string
	// Reason is the model's justification, when it gave one.
	Reason string
	// Command and Cwd are set for command approvals.
	Command, Cwd string
	// GrantRoot, for file changes, is a directory the model asks write
	// access to for the rest of the session.
	GrantRoot string

	id      string          // ApprovalID
	rawID   json.RawMessage // the JSON-RPC id to answer
	client  *Client
	replied atomic.Bool
}

// ErrAlreadyReplied is returned by a second Approval.Reply.
var ErrAlreadyReplied = errors.New("codex approval already answered")

// ID identifies the approval among all of the client's: the turn id and the
// JSON-RPC request id. Use it as the PermissionRequest's request_id.
func (a *Approval) ID() string { return a.id }

// Reply answers the request. Only the first reply counts; a reply to a
// request Codex already withdrew is ignored by Codex.
func (a *Approval) Reply(ctx context.Context, d Decision) error {
	if !a.replied.CompareAndSwap(false, true) {
		return ErrAlreadyReplied
	}
	if a.client == nil {
		return errors.New("codex approval has no client")
	}
	if err := a.client.respond(ctx, a.rawID, ApprovalResponse{Decision: d}); err != nil {
		return fmt.Errorf("answer codex approval %s: %w", a.id, err)
	}
	return nil
}
