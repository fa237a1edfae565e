package push

import pb "github.com/betcode-dev/betcode/shared/betcodepb"

// KindResolved is the payload type that withdraws a prompt's notification
// once the prompt is resolved (answered, timed out, withdrawn with its
// turn, or its session deleted): the service worker closes the
// notification with its tag and shows nothing (docs/web-api.md,
// "Notifications that clear"). It goes to the subscriptions that wanted
// the prompt; the relay cannot tell which device answered, so the one that
// did gets it too (its notification is closed already).
const KindResolved = "resolved"

// openPrompts are the prompts a watch notified and has not seen resolved,
// by session and request id.
type openPrompts map[string]map[string]event

// remember records a notified prompt as open.
func (o openPrompts) remember(e event) {
	if o[e.n.SessionID] == nil {
		o[e.n.SessionID] = map[string]event{}
	}
	o[e.n.SessionID][e.n.RequestID] = e
}

// promptID is the request id of a pending prompt event, or "".
func promptID(ev *pb.AgentEvent) string {
	if r := ev.GetPermissionRequest(); r != nil {
		return r.GetRequestId()
	}
	return ev.GetUserQuestion().GetQuestionId()
}

// resolveGone withdraws the notifications of session sid's prompts that u
// (an update of sid, which lists its open prompts) no longer shows open.
func (s *Service) resolveGone(machineID string, open openPrompts, sid string, u *pb.SessionUpdate) {
	if len(open[sid]) == 0 {
		return
	}
	still := map[string]bool{}
	for _, ev := range u.GetPending() {
		still[promptID(ev)] = true
	}
	if c := u.GetCause(); c != nil {
		still[promptID(c)] = true // the prompt this update announces
	}
	for id, e := range open[sid] {
		if !still[id] {
			delete(open[sid], id)
			s.resolve(machineID, e)
		}
	}
	if len(open[sid]) == 0 {
		delete(open, sid)
	}
}

// resolveAll withdraws the notifications of every open prompt of session
// sid.
func (s *Service) resolveAll(machineID string, open openPrompts, sid string) {
	for _, e := range open[sid] {
		s.resolve(machineID, e)
	}
	delete(open, sid)
}

// resolve queues prompt e's withdrawal: its tag and topic, high urgency,
// once per subscription (the store's claim of "resolved/" and its key).
func (s *Service) resolve(machineID string, e event) {
	r := Notification{Type: KindResolved, MachineID: e.n.MachineID, SessionID: e.n.SessionID, RequestID: e.n.RequestID, Tag: e.n.Tag}
	s.notify(machineID, event{n: r, createdBy: e.createdBy, key: KindResolved + "/" + e.key, urgency: e.urgency, prompt: e.n.Type})
}
