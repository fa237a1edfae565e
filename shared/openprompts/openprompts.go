// Package openprompts keeps the prompts (permission requests and
// questions) a push notifier notified and has not yet seen resolved, from
// a machine's WatchSessions updates, so that each prompt's notification is
// withdrawn once: the relay's notifier (relay/push) and the agent's
// (agent/push) both follow it.
package openprompts

import pb "github.com/betcode-dev/betcode/shared/betcodepb"

// Set holds a notifier's open prompts, by session and request id; E is
// the notifier's record of the notification it sent. Its zero value is
// not usable: make one (Set[E]{}). It is not safe for concurrent use.
type Set[E any] map[string]map[string]E

// ID is the request id of a pending prompt event: its permission
// request's or question's id, or "".
func ID(ev *pb.AgentEvent) string {
	if r := ev.GetPermissionRequest(); r != nil {
		return r.GetRequestId()
	}
	return ev.GetUserQuestion().GetQuestionId()
}

// Add records prompt id of session sid as notified (e) and open.
func (s Set[E]) Add(sid, id string, e E) {
	if s[sid] == nil {
		s[sid] = map[string]E{}
	}
	s[sid][id] = e
}

// Gone removes and returns the prompts of u's session that u shows
// resolved: every one when u deletes the session, else those u no longer
// lists open (an update carries its session's open prompts in Pending;
// its Cause may be the prompt it announces).
func (s Set[E]) Gone(u *pb.SessionUpdate) []E {
	sid := u.GetSession().GetId()
	if u.GetDeleted() {
		return s.drop(sid)
	}
	open := s[sid]
	if len(open) == 0 {
		return nil
	}
	still := map[string]bool{}
	for _, ev := range u.GetPending() {
		still[ID(ev)] = true
	}
	if c := u.GetCause(); c != nil {
		still[ID(c)] = true
	}
	var gone []E
	for id, e := range open {
		if !still[id] {
			delete(open, id)
			gone = append(gone, e)
		}
	}
	if len(open) == 0 {
		delete(s, sid)
	}
	return gone
}

// Unlisted removes and returns the prompts of the sessions not in listed
// (the sessions of a new snapshot: the others ended, their prompts with
// them, while no watch was open).
func (s Set[E]) Unlisted(listed map[string]bool) []E {
	var gone []E
	for sid := range s {
		if !listed[sid] {
			gone = append(gone, s.drop(sid)...)
		}
	}
	return gone
}

// drop removes and returns every prompt of session sid.
func (s Set[E]) drop(sid string) []E {
	var gone []E
	for _, e := range s[sid] {
		gone = append(gone, e)
	}
	delete(s, sid)
	return gone
}
