package bridge

import (
	"encoding/json"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ToolAskUserQuestion is the tool whose can_use_tool becomes UserQuestions.
const ToolAskUserQuestion = "AskUserQuestion"

// askInput is AskUserQuestionInput: 1–4 questions of 2–4 options each.
type askInput struct {
	Questions []struct {
		Question    string `json:"question"`
		Header      string `json:"header"`
		MultiSelect bool   `json:"multiSelect"`
		Options     []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
}

// questionEvents turns an AskUserQuestion input into one UserQuestion per
// question, all with the control request's id as question_id. It returns
// nil when the input holds no question, so the caller can fall back to a
// PermissionRequest (the request still needs an answer).
func questionEvents(requestID string, input json.RawMessage) []*pb.AgentEvent {
	var in askInput
	if json.Unmarshal(input, &in) != nil {
		return nil
	}
	var out []*pb.AgentEvent
	for _, q := range in.Questions {
		if q.Question == "" {
			continue
		}
		uq := &pb.UserQuestion{QuestionId: requestID, Question: q.Question, MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			uq.Options = append(uq.Options, &pb.QuestionOption{Value: o.Label, Label: o.Label, Description: o.Description})
		}
		out = append(out, &pb.AgentEvent{Event: &pb.AgentEvent_UserQuestion{UserQuestion: uq}})
	}
	return out
}
