package session

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Message is a user message for Send.
type Message struct {
	// ClientID names the sending client for the input lock: a client
	// without the lock is refused while another holds it, and a named
	// client takes a free lock. "" sends regardless of the lock.
	ClientID string
	// SentBy is the user the relay named (x-betcode-user); "" for local
	// clients. It is recorded in the message's UserInputEvent.
	SentBy      string
	Text        string
	Attachments []*pb.Attachment

	// internal marks a prompt the agent makes itself (/compact): it is not
	// recorded as user input and does not change the session's preview or
	// message count.
	internal bool
}

// UserInputEvent is the event that records msg in the session's log: the
// text and each attachment's name, type and size, never its bytes.
func UserInputEvent(msg Message) *pb.AgentEvent {
	in := &pb.UserInputEvent{Content: msg.Text, SentBy: msg.SentBy}
	for _, a := range msg.Attachments {
		in.Attachments = append(in.Attachments, &pb.AttachmentInfo{
			Filename: a.GetFilename(), MimeType: a.GetMimeType(), Size: uint64(len(a.GetData())),
		})
	}
	return &pb.AgentEvent{Event: &pb.AgentEvent_UserInput{UserInput: in}}
}

// sequenceLocked gives ev the next sequence and the current time, queues it
// for publishing and returns its log record. s.emitMu and s.mu are held;
// the caller appends the record after releasing s.mu.
func (s *Session) sequenceLocked(ev *pb.AgentEvent) (eventlog.Event, error) {
	now := s.m.cfg.Now()
	ev.Timestamp = timestamppb.New(now)
	ev.Sequence = s.seq + 1
	payload, err := proto.Marshal(ev)
	if err != nil {
		return eventlog.Event{}, err
	}
	s.seq++
	s.pending = append(s.pending, &published{ev: ev, wire: wirecodec.NewWire(payload)})
	return eventlog.Event{SessionID: s.id, Seq: ev.Sequence, Time: now, Kind: Kind(ev), Payload: payload}, nil
}

// appendRecord writes a sequenced event to the log; like emit's appends it
// is not cancelled with the caller's context. s.emitMu is held.
func (s *Session) appendRecord(ctx context.Context, r eventlog.Event) {
	if err := s.m.log.Append(context.WithoutCancel(ctx), r); err != nil {
		s.m.cfg.Logger.Error("session: persist event", "session_id", s.id, "seq", r.Seq, "err", err)
	}
}
