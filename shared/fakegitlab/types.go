package fakegitlab

import "time"

// The resources below carry the fields of GitLab's documented answers that
// BetCode reads, with GitLab's JSON names (docs.gitlab.com/api/merge_requests,
// /api/pipelines, /api/jobs, /api/issues).

// User is GitLab's basic user object (author, assignee).
type User struct {
	ID        int64  `json:"id"`
	Username  string `json:"username"`
	Name      string `json:"name"`
	State     string `json:"state"`
	AvatarURL string `json:"avatar_url"`
	WebURL    string `json:"web_url"`
}

// MergeRequest is a merge request; HeadPipeline is sent only by the
// single-MR endpoint, as GitLab does.
type MergeRequest struct {
	ID                  int64      `json:"id"`
	IID                 int64      `json:"iid"`
	ProjectID           int64      `json:"project_id"`
	Title               string     `json:"title"`
	Description         string     `json:"description"`
	State               string     `json:"state"` // opened, closed, merged, locked
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	MergedAt            *time.Time `json:"merged_at"`
	ClosedAt            *time.Time `json:"closed_at"`
	TargetBranch        string     `json:"target_branch"`
	SourceBranch        string     `json:"source_branch"`
	Author              User       `json:"author"`
	Labels              []string   `json:"labels"`
	Draft               bool       `json:"draft"`
	WorkInProgress      bool       `json:"work_in_progress"`
	MergeStatus         string     `json:"merge_status"`
	DetailedMergeStatus string     `json:"detailed_merge_status"`
	SHA                 string     `json:"sha"`
	WebURL              string     `json:"web_url"`
	HeadPipeline        *Pipeline  `json:"head_pipeline,omitempty"`
}

// Pipeline is a CI pipeline; Duration is sent only by the single-pipeline
// endpoint and the MR's head_pipeline.
type Pipeline struct {
	ID        int64     `json:"id"`
	IID       int64     `json:"iid"`
	ProjectID int64     `json:"project_id"`
	SHA       string    `json:"sha"`
	Ref       string    `json:"ref"`
	Status    string    `json:"status"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	WebURL    string    `json:"web_url"`
	Duration  *int64    `json:"duration,omitempty"`
}

// JobPipeline is the pipeline summary inside a job.
type JobPipeline struct {
	ID        int64  `json:"id"`
	ProjectID int64  `json:"project_id"`
	Ref       string `json:"ref"`
	SHA       string `json:"sha"`
	Status    string `json:"status"`
}

// Job is a CI job. Trace is its log, served by the trace endpoint.
type Job struct {
	ID             int64       `json:"id"`
	Status         string      `json:"status"`
	Stage          string      `json:"stage"`
	Name           string      `json:"name"`
	Ref            string      `json:"ref"`
	Tag            bool        `json:"tag"`
	AllowFailure   bool        `json:"allow_failure"`
	CreatedAt      time.Time   `json:"created_at"`
	StartedAt      *time.Time  `json:"started_at"`
	FinishedAt     *time.Time  `json:"finished_at"`
	Duration       *float64    `json:"duration"`
	QueuedDuration *float64    `json:"queued_duration"`
	FailureReason  string      `json:"failure_reason,omitempty"`
	WebURL         string      `json:"web_url"`
	User           *User       `json:"user,omitempty"`
	Pipeline       JobPipeline `json:"pipeline"`
	Trace          string      `json:"-"`
}

// Issue is an issue.
type Issue struct {
	ID          int64      `json:"id"`
	IID         int64      `json:"iid"`
	ProjectID   int64      `json:"project_id"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	State       string     `json:"state"` // opened, closed
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	ClosedAt    *time.Time `json:"closed_at"`
	Labels      []string   `json:"labels"`
	Author      User       `json:"author"`
	Assignees   []User     `json:"assignees"`
	Assignee    *User      `json:"assignee"`
	WebURL      string     `json:"web_url"`
}

// Project is a project and everything in it.
type Project struct {
	ID                int64
	PathWithNamespace string // e.g. "group/repo"
	MergeRequests     []MergeRequest
	Pipelines         []Pipeline
	// Jobs of every pipeline; Job.Pipeline.ID says whose.
	Jobs   []Job
	Issues []Issue
}
