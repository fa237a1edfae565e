package sessionsvc

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/eventlog"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Metadata keys of what SessionService adds to a session.
const (
	metaPrefix       = "betcode.managed."
	metaStatus       = metaPrefix + "status" // "stopped" | "failed"; absent otherwise
	metaError        = metaPrefix + "error"
	metaTaskID       = metaPrefix + "task_id"
	metaMaxTokens    = metaPrefix + "max_tokens"
	metaTimeout      = metaPrefix + "timeout"
	metaRestarts     = metaPrefix + "restart_count"
	metaStartedAt    = metaPrefix + "started_at"
	metaEndedAt      = metaPrefix + "ended_at"
	metaRestartedOf  = metaPrefix + "restarted_from"
	metaInitialModel = metaPrefix + "model" // the model asked for ("" = default)
)

// markOf is the terminal status stored in a session's metadata, or
// UNSPECIFIED.
func markOf(md map[string]string) pb.SessionStatus {
	switch md[metaStatus] {
	case "stopped":
		return pb.SessionStatus_SESSION_STATUS_STOPPED
	case "failed":
		return pb.SessionStatus_SESSION_STATUS_FAILED
	}
	return pb.SessionStatus_SESSION_STATUS_UNSPECIFIED
}

func markName(st pb.SessionStatus) string {
	if st == pb.SessionStatus_SESSION_STATUS_FAILED {
		return "failed"
	}
	return "stopped"
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return timestamppb.New(t)
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// managed builds the ManagedSession view of a stored session.
func managed(meta eventlog.Session, st pb.SessionStatus, kind pb.SessionProvider, pid int) *pb.ManagedSession {
	md := meta.Metadata
	ms := &pb.ManagedSession{
		Id: meta.ID, WorkingDirectory: meta.WorkingDirectory, Provider: kind, Model: meta.Model,
		AgentName: meta.Name, Status: st, TaskId: md[metaTaskID],
		TokensInput:  int64(min(meta.TotalInputTokens, 1<<63-1)),
		TokensOutput: int64(min(meta.TotalOutputTokens, 1<<63-1)),
		MaxTokens:    atoi64(md[metaMaxTokens]), Pid: int32(pid), RestartCount: int32(atoi64(md[metaRestarts])),
		CreatedAt: timestamppb.New(meta.CreatedAt), StartedAt: parseTime(md[metaStartedAt]),
		LastActivityAt: timestamppb.New(meta.UpdatedAt), EndedAt: parseTime(md[metaEndedAt]),
		ErrorMessage: md[metaError],
	}
	return ms
}
