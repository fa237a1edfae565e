package push

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// answerTTL is how long an answer's device is remembered for the
// resolution it causes: the session publishes the resolution while the
// answer's call runs, so a few seconds would do.
const answerTTL = 5 * time.Minute

// maxAnswers bounds the answers remembered.
const maxAnswers = 4096

// Answers remembers which paired device answered which prompt, so that
// the "resolved" push that withdraws the prompt's notifications skips the
// device that answered (it closed its own). It learns the device from the
// call that answers: UnaryInterceptor and StreamInterceptor on the agent's
// gRPC server (a device's channel is the call's peer, an e2ee.Addr), and
// Note for answers that reach the sessions another way (a sealed
// envelope). It is safe for concurrent use; the zero value is not: use
// NewAnswers.
type Answers struct {
	now func() time.Time

	mu sync.Mutex
	by map[string]*answer // request id -> who answered
}

// answer is the devices (by key fingerprint) whose answer to one prompt
// is under way or was taken.
type answer struct {
	at      time.Time
	devices map[string]int // fingerprint -> answers under way or taken
}

// NewAnswers returns an empty Answers.
func NewAnswers() *Answers {
	return &Answers{now: time.Now, by: map[string]*answer{}}
}

// Note records that the device of fingerprint answers requestID (a
// permission request's or question's id) and returns the function to call
// if the answer was refused (it then forgets it). An empty fingerprint or
// request id (a local client, a malformed call) is not recorded.
func (a *Answers) Note(requestID, fingerprint string) (refused func()) {
	if a == nil || requestID == "" || fingerprint == "" {
		return func() {}
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.by) >= maxAnswers {
		for id, x := range a.by {
			if now.Sub(x.at) > answerTTL || len(a.by) >= maxAnswers {
				delete(a.by, id)
			}
		}
	}
	x := a.by[requestID]
	if x == nil {
		x = &answer{devices: map[string]int{}}
		a.by[requestID] = x
	}
	x.at = now
	x.devices[fingerprint]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.by[requestID] != x {
				return
			}
			if x.devices[fingerprint]--; x.devices[fingerprint] <= 0 {
				delete(x.devices, fingerprint)
			}
			if len(x.devices) == 0 {
				delete(a.by, requestID)
			}
		})
	}
}

// Take returns the fingerprints of the devices that answered requestID,
// and forgets them.
func (a *Answers) Take(requestID string) map[string]bool {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	x := a.by[requestID]
	delete(a.by, requestID)
	if x == nil || a.now().Sub(x.at) > answerTTL {
		return nil
	}
	out := make(map[string]bool, len(x.devices))
	for fp := range x.devices {
		out[fp] = true
	}
	return out
}

// callerFingerprint is the key fingerprint of the paired device whose
// channel ctx's call came through, or "" (a local client, the relay).
func callerFingerprint(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if a, ok := p.Addr.(e2ee.Addr); ok && a.Role == e2ee.RoleDevice {
		return a.Fingerprint
	}
	return ""
}

// answered is the prompt a unary call answers, or "".
func answered(req any) string {
	switch r := req.(type) {
	case *pb.AnswerPermissionRequest:
		return r.GetResponse().GetRequestId()
	case *pb.AnswerQuestionRequest:
		return r.GetResponse().GetQuestionId()
	}
	return ""
}

// UnaryInterceptor notes the device answering a prompt with
// AgentService.AnswerPermission or AnswerQuestion through its channel
// (forgotten again when the call fails).
func (a *Answers) UnaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id := answered(req)
	if id == "" {
		return handler(ctx, req)
	}
	fp := callerFingerprint(ctx)
	if fp == "" {
		return handler(ctx, req)
	}
	refused := a.Note(id, fp)
	resp, err := handler(ctx, req)
	if err != nil {
		refused()
	}
	return resp, err
}

// StreamInterceptor notes the device answering a prompt inside a Converse
// stream through its channel.
func (a *Answers) StreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	fp := callerFingerprint(ss.Context())
	if fp == "" {
		return handler(srv, ss)
	}
	return handler(srv, &answerStream{ServerStream: ss, a: a, fp: fp})
}

// answerStream notes the answers among a stream's messages.
type answerStream struct {
	grpc.ServerStream
	a  *Answers
	fp string
}

func (s *answerStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if r, ok := m.(*pb.AgentRequest); ok {
		switch {
		case r.GetPermission() != nil:
			s.a.Note(r.GetPermission().GetRequestId(), s.fp)
		case r.GetQuestionResponse() != nil:
			s.a.Note(r.GetQuestionResponse().GetQuestionId(), s.fp)
		}
	}
	return nil
}
