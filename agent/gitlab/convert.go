package gitlab

import (
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(*t)
}

func mrState(s string) pb.MergeRequestState {
	switch s {
	case "opened":
		return pb.MergeRequestState_MERGE_REQUEST_STATE_OPENED
	case "closed":
		return pb.MergeRequestState_MERGE_REQUEST_STATE_CLOSED
	case "merged":
		return pb.MergeRequestState_MERGE_REQUEST_STATE_MERGED
	case "locked":
		return pb.MergeRequestState_MERGE_REQUEST_STATE_LOCKED
	}
	return pb.MergeRequestState_MERGE_REQUEST_STATE_UNSPECIFIED
}

// mrStateFilter is GitLab's state filter of s ("" for all).
func mrStateFilter(s pb.MergeRequestState) string {
	switch s {
	case pb.MergeRequestState_MERGE_REQUEST_STATE_OPENED:
		return "opened"
	case pb.MergeRequestState_MERGE_REQUEST_STATE_CLOSED:
		return "closed"
	case pb.MergeRequestState_MERGE_REQUEST_STATE_MERGED:
		return "merged"
	case pb.MergeRequestState_MERGE_REQUEST_STATE_LOCKED:
		return "locked"
	}
	return ""
}

// statuses are GitLab's pipeline and job statuses by PipelineStatus.
var statuses = map[pb.PipelineStatus]string{
	pb.PipelineStatus_PIPELINE_STATUS_CREATED:              "created",
	pb.PipelineStatus_PIPELINE_STATUS_WAITING_FOR_RESOURCE: "waiting_for_resource",
	pb.PipelineStatus_PIPELINE_STATUS_PREPARING:            "preparing",
	pb.PipelineStatus_PIPELINE_STATUS_PENDING:              "pending",
	pb.PipelineStatus_PIPELINE_STATUS_RUNNING:              "running",
	pb.PipelineStatus_PIPELINE_STATUS_SUCCESS:              "success",
	pb.PipelineStatus_PIPELINE_STATUS_FAILED:               "failed",
	pb.PipelineStatus_PIPELINE_STATUS_CANCELED:             "canceled",
	pb.PipelineStatus_PIPELINE_STATUS_SKIPPED:              "skipped",
	pb.PipelineStatus_PIPELINE_STATUS_MANUAL:               "manual",
	pb.PipelineStatus_PIPELINE_STATUS_SCHEDULED:            "scheduled",
}

func statusFilter(s pb.PipelineStatus) string { return statuses[s] }

func pipelineStatus(s string) pb.PipelineStatus {
	for k, v := range statuses {
		if v == s {
			return k
		}
	}
	if s == "cancelled" {
		return pb.PipelineStatus_PIPELINE_STATUS_CANCELED
	}
	return pb.PipelineStatus_PIPELINE_STATUS_UNSPECIFIED
}

// finished reports whether a job in GitLab status s will not run again
// (its log is complete).
func finished(s string) bool {
	switch s {
	case "success", "failed", "canceled", "cancelled", "skipped", "manual":
		return true
	}
	return false
}

func basicMR(project string, mr *gl.BasicMergeRequest) *pb.MergeRequestInfo {
	out := &pb.MergeRequestInfo{
		Id: uint64(mr.ID), Iid: uint64(mr.IID), Project: project, Title: mr.Title, Description: mr.Description,
		State: mrState(mr.State), SourceBranch: mr.SourceBranch, TargetBranch: mr.TargetBranch,
		WebUrl: mr.WebURL, Draft: mr.Draft, Labels: mr.Labels, MergeStatus: mr.DetailedMergeStatus,
		CreatedAt: ts(mr.CreatedAt), UpdatedAt: ts(mr.UpdatedAt),
	}
	if mr.Author != nil {
		out.Author = mr.Author.Username
	}
	return out
}

func pipelineInfo(project string, p *gl.PipelineInfo) *pb.PipelineInfo {
	return &pb.PipelineInfo{
		Id: uint64(p.ID), Iid: uint64(p.IID), Project: project, Ref: p.Ref, Sha: p.SHA,
		Status: pipelineStatus(p.Status), Source: p.Source, WebUrl: p.WebURL,
		CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt),
	}
}

func jobInfo(j *gl.Job) *pb.JobInfo {
	return &pb.JobInfo{
		Id: uint64(j.ID), Name: j.Name, Stage: j.Stage, Status: pipelineStatus(j.Status), WebUrl: j.WebURL,
		DurationSecs: j.Duration, AllowFailure: j.AllowFailure, FailureReason: j.FailureReason,
		StartedAt: ts(j.StartedAt), FinishedAt: ts(j.FinishedAt),
	}
}

func issueInfo(project string, is *gl.Issue) *pb.IssueInfo {
	out := &pb.IssueInfo{
		Id: uint64(is.ID), Iid: uint64(is.IID), Project: project, Title: is.Title, Description: is.Description,
		Labels: is.Labels, WebUrl: is.WebURL,
		CreatedAt: ts(is.CreatedAt), UpdatedAt: ts(is.UpdatedAt), ClosedAt: ts(is.ClosedAt),
	}
	switch is.State {
	case "opened":
		out.State = pb.IssueState_ISSUE_STATE_OPENED
	case "closed":
		out.State = pb.IssueState_ISSUE_STATE_CLOSED
	}
	if is.Author != nil {
		out.Author = is.Author.Username
	}
	for _, a := range is.Assignees {
		if a != nil {
			out.Assignees = append(out.Assignees, a.Username)
		}
	}
	return out
}
