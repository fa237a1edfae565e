package openprompts

import (
	"slices"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func permission(id string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_PermissionRequest{PermissionRequest: &pb.PermissionRequest{RequestId: id}}}
}

func question(id string) *pb.AgentEvent {
	return &pb.AgentEvent{Event: &pb.AgentEvent_UserQuestion{UserQuestion: &pb.UserQuestion{QuestionId: id}}}
}

func TestGone(t *testing.T) {
	text := &pb.AgentEvent{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "x"}}}
	s1 := &pb.SessionSummary{Id: "s1"}
	for _, tc := range []struct {
		name string
		u    *pb.SessionUpdate
		gone []string
		left []string // s1's prompts still open
	}{
		{"all still pending", &pb.SessionUpdate{Session: s1, Cause: text, Pending: []*pb.AgentEvent{permission("r1"), question("q1")}}, nil, []string{"q1", "r1"}},
		{"one answered", &pb.SessionUpdate{Session: s1, Cause: text, Pending: []*pb.AgentEvent{question("q1")}}, []string{"r1"}, []string{"q1"}},
		{"the cause announces one", &pb.SessionUpdate{Session: s1, Cause: permission("r1")}, []string{"q1"}, []string{"r1"}},
		{"none open", &pb.SessionUpdate{Session: s1, Cause: text}, []string{"q1", "r1"}, nil},
		{"session deleted", &pb.SessionUpdate{Session: s1, Deleted: true, Pending: []*pb.AgentEvent{permission("r1")}}, []string{"q1", "r1"}, nil},
		{"another session", &pb.SessionUpdate{Session: &pb.SessionSummary{Id: "s2"}, Cause: text}, nil, []string{"q1", "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Set[string]{}
			s.Add("s1", "r1", "r1")
			s.Add("s1", "q1", "q1")
			gone := s.Gone(tc.u)
			slices.Sort(gone)
			var left []string
			for id := range s["s1"] {
				left = append(left, id)
			}
			slices.Sort(left)
			if !slices.Equal(gone, tc.gone) || !slices.Equal(left, tc.left) {
				t.Errorf("gone %v, left %v; want %v, %v", gone, left, tc.gone, tc.left)
			}
			if len(tc.left) == 0 && s["s1"] != nil {
				t.Error("an emptied session is kept")
			}
		})
	}
}

func TestUnlisted(t *testing.T) {
	s := Set[string]{}
	s.Add("s1", "r1", "r1")
	s.Add("s2", "r2", "r2")
	s.Add("s2", "r3", "r3")
	gone := s.Unlisted(map[string]bool{"s1": true})
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"r2", "r3"}) || len(s) != 1 || s["s1"]["r1"] != "r1" {
		t.Errorf("gone %v, left %v; want r2 and r3 gone, s1's r1 left", gone, s)
	}
}

func TestID(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   *pb.AgentEvent
		want string
	}{
		{"permission request", permission("r1"), "r1"},
		{"question", question("q1"), "q1"},
		{"other", &pb.AgentEvent{}, ""},
		{"nil", nil, ""},
	} {
		if got := ID(tc.ev); got != tc.want {
			t.Errorf("%s: ID = %q, want %q", tc.name, got, tc.want)
		}
	}
}
