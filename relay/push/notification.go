package push

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	webpush "github.com/SherClockHolmes/webpush-go"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Notification kinds (the payload's type).
const (
	KindPermission   = "permission_request"
	KindQuestion     = "question"
	KindTurnComplete = "turn_complete"
	KindTurnFailed   = "turn_failed"
	KindTest         = "test"
)

// Kinds are the kinds a subscription may choose (PushSubscription.Kinds).
var Kinds = []string{KindPermission, KindQuestion, KindTurnComplete, KindTurnFailed}

// Notification is the JSON payload the service worker receives
// (docs/web-api.md, "Push notifications").
type Notification struct {
	Type      string `json:"type"`
	MachineID string `json:"machineId"`
	SessionID string `json:"sessionId,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	Tag       string `json:"tag"`
	URL       string `json:"url"`
}

// Limits that keep a payload well inside a push message's 4 KiB record.
const (
	maxTitle = 120
	maxBody  = 600
)

// event is one thing to notify: the payload, its recipients' session
// creator and the key it is sent once per subscription under.
type event struct {
	n         Notification
	createdBy string // the session's creator ("" when none)
	key       string // deduplication key (per subscription)
	urgency   webpush.Urgency
	prompt    string // a resolution's: the kind of the prompt it resolves
}

// topic is the RFC 8030 Topic header for tag: at most 32 characters of the
// base64url alphabet, so a hash. A newer message with the same topic
// replaces one the push service still holds.
func topic(tag string) string {
	h := sha256.Sum256([]byte(tag))
	return base64.RawURLEncoding.EncodeToString(h[:])[:32]
}

// sessionURL is the web app's route to a session.
func sessionURL(machineID, sessionID string) string {
	return "/#/m/" + url.PathEscape(machineID) + "/s/" + url.PathEscape(sessionID)
}

// clip shortens s to at most n runes, with an ellipsis when cut, and
// flattens newlines.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// sessionLabel names a session for a notification's text.
func sessionLabel(s *pb.SessionSummary) string {
	if s.GetName() != "" {
		return s.GetName()
	}
	if p := s.GetLastMessagePreview(); p != "" {
		return p
	}
	return "session " + s.GetId()
}

// inputSummary is the most telling field of a tool's input: the command
// of Bash, the path of an edit, the URL of a fetch.
func inputSummary(req *pb.PermissionRequest) string {
	fields := req.GetInput().GetFields()
	for _, k := range []string{"command", "file_path", "path", "url", "pattern", "query", "prompt"} {
		if v := fields[k].GetStringValue(); v != "" {
			return v
		}
	}
	return ""
}

// promptEvent is the notification of a pending permission request or
// question ev of session s, or false when ev is neither.
func promptEvent(machineID string, s *pb.SessionSummary, ev *pb.AgentEvent) (event, bool) {
	n := Notification{MachineID: machineID, SessionID: s.GetId(), URL: sessionURL(machineID, s.GetId())}
	switch {
	case ev.GetPermissionRequest() != nil:
		req := ev.GetPermissionRequest()
		n.Type, n.RequestID = KindPermission, req.GetRequestId()
		tool := req.GetToolName()
		if tool == "" {
			tool = "A tool"
		}
		n.Title = clip(tool+" wants to run", maxTitle)
		body := inputSummary(req)
		if body == "" {
			body = req.GetDescription()
		}
		if body == "" {
			body = sessionLabel(s)
		}
		n.Body = clip(body, maxBody)
	case ev.GetUserQuestion() != nil:
		q := ev.GetUserQuestion()
		n.Type, n.RequestID = KindQuestion, q.GetQuestionId()
		n.Title = clip("Claude asks: "+sessionLabel(s), maxTitle)
		n.Body = clip(q.GetQuestion(), maxBody)
	default:
		return event{}, false
	}
	if n.RequestID == "" {
		return event{}, false
	}
	n.Tag = machineID + "/" + n.SessionID + "/" + n.RequestID
	return event{n: n, createdBy: s.GetCreatedBy(), key: n.Tag, urgency: webpush.UrgencyHigh}, true
}

// turnEvent is the notification of a turn that ended (turn_complete) or
// failed (a fatal error, or a turn_complete whose stop reason is an
// error), or false for anything else, including a turn the user cancelled.
func turnEvent(machineID string, s *pb.SessionSummary, ev *pb.AgentEvent) (event, bool) {
	n := Notification{MachineID: machineID, SessionID: s.GetId(), URL: sessionURL(machineID, s.GetId()), Tag: machineID + "/" + s.GetId()}
	label := sessionLabel(s)
	switch {
	case ev.GetTurnComplete() != nil:
		reason := ev.GetTurnComplete().GetStopReason()
		switch {
		case reason == "cancelled":
			return event{}, false
		case strings.Contains(reason, "error"):
			n.Type, n.Title, n.Body = KindTurnFailed, clip("Turn failed: "+label, maxTitle), "stopped: "+reason
		default:
			n.Type, n.Title = KindTurnComplete, clip("Turn finished: "+label, maxTitle)
			n.Body = s.GetLastMessagePreview()
			if n.Body == "" {
				n.Body = "stopped: " + reason
			}
		}
	case ev.GetError() != nil && ev.GetError().GetIsFatal():
		e := ev.GetError()
		n.Type, n.Title, n.Body = KindTurnFailed, clip("Turn failed: "+label, maxTitle), e.GetMessage()
		if e.GetCode() != "" {
			n.Body = e.GetCode() + ": " + n.Body
		}
	default:
		return event{}, false
	}
	n.Body = clip(n.Body, maxBody)
	// The sequence names the turn's end; an event that was not stored
	// (sequence 0) is named by its time instead.
	turn := fmt.Sprint(ev.GetSequence())
	if ev.GetSequence() == 0 {
		turn = "t" + fmt.Sprint(ev.GetTimestamp().AsTime().UnixNano())
	}
	return event{n: n, createdBy: s.GetCreatedBy(), key: n.Tag + "/turn/" + turn, urgency: webpush.UrgencyNormal}, true
}
