package betcodepb_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestWireNumbers pins a sample of names and numbers that clients written
// from the spec depend on; buf breaking guards the rest once committed.
func TestWireNumbers(t *testing.T) {
	tests := []struct {
		name   string
		msg    protoreflect.MessageDescriptor
		fields map[string]protoreflect.FieldNumber
	}{
		{"AgentRequest", (&betcodepb.AgentRequest{}).ProtoReflect().Descriptor(), map[string]protoreflect.FieldNumber{
			"start": 1, "message": 2, "permission": 3, "question_response": 4, "cancel": 5,
		}},
		{"AgentEvent", (&betcodepb.AgentEvent{}).ProtoReflect().Descriptor(), map[string]protoreflect.FieldNumber{
			"sequence": 1, "timestamp": 2, "parent_tool_use_id": 3,
			"text_delta": 10, "tool_call_start": 11, "tool_call_result": 12, "permission_request": 13,
			"user_question": 14, "todo_update": 15, "status_change": 16, "session_info": 17,
			"error": 18, "usage": 19, "plan_mode": 20, "turn_complete": 21,
		}},
		{"SessionInfo", (&betcodepb.SessionInfo{}).ProtoReflect().Descriptor(), map[string]protoreflect.FieldNumber{
			"is_resumed": 6, "is_compacted": 7, "context_usage_percent": 8,
		}},
		{"ErrorEvent", (&betcodepb.ErrorEvent{}).ProtoReflect().Descriptor(), map[string]protoreflect.FieldNumber{
			"code": 1, "message": 2, "is_fatal": 3, "details": 4,
		}},
		{"TunnelFrame", (&betcodepb.TunnelFrame{}).ProtoReflect().Descriptor(), map[string]protoreflect.FieldNumber{
			"request_id": 1, "sequence": 2, "grpc_request": 3, "grpc_response": 4, "heartbeat": 5,
			"error": 6, "stream": 7, "service_name": 8, "method_name": 9,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, want := range tt.fields {
				f := tt.msg.Fields().ByName(protoreflect.Name(name))
				if f == nil {
					t.Errorf("field %s missing", name)
					continue
				}
				if f.Number() != want {
					t.Errorf("field %s = %d, want %d", name, f.Number(), want)
				}
			}
		})
	}
}

func TestEnumValues(t *testing.T) {
	tests := []struct {
		got  protoreflect.Enum
		name string
		num  protoreflect.EnumNumber
	}{
		{betcodepb.PermissionDecision_ALLOW_ONCE, "ALLOW_ONCE", 1},
		{betcodepb.PermissionDecision_DENY, "DENY", 3},
		{betcodepb.AgentStatus_THINKING, "THINKING", 1},
		{betcodepb.AgentStatus_ERROR, "ERROR", 6},
		{betcodepb.TodoStatus_COMPLETED, "COMPLETED", 3},
		{betcodepb.MachineStatus_ONLINE, "ONLINE", 1},
		{betcodepb.ServingStatus_UNKNOWN, "UNKNOWN", 0},
		{betcodepb.ServingStatus_SERVICE_UNKNOWN, "SERVICE_UNKNOWN", 3},
		{betcodepb.CompatibilityLevel_DEGRADED, "DEGRADED", 3},
		{betcodepb.FeatureStage_REMOVED, "REMOVED", 5},
		{betcodepb.Severity_URGENT, "URGENT", 3},
		{betcodepb.SessionStatus_SESSION_STATUS_FAILED, "SESSION_STATUS_FAILED", 7},
	}
	for _, tt := range tests {
		v := tt.got.Descriptor().Values().ByNumber(tt.got.Number())
		if string(v.Name()) != tt.name || v.Number() != tt.num {
			t.Errorf("got %s=%d, want %s=%d", v.Name(), v.Number(), tt.name, tt.num)
		}
	}
}

// TestMethodPaths checks the full method names the spec's endpoints and the
// relay's router use.
func TestMethodPaths(t *testing.T) {
	for got, want := range map[string]string{
		betcodepb.BetCodeHealth_GetHealthDetails_FullMethodName: "/betcode.v1.BetCodeHealth/GetHealthDetails",
		betcodepb.AgentService_Converse_FullMethodName:          "/betcode.v1.AgentService/Converse",
		betcodepb.TunnelService_OpenTunnel_FullMethodName:       "/betcode.v1.TunnelService/OpenTunnel",
		betcodepb.SessionService_CreateSession_FullMethodName:   "/betcode.v1.SessionService/CreateSession",
	} {
		if got != want {
			t.Errorf("method %q, want %q", got, want)
		}
	}
}
