package gitlab

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"

	gl "gitlab.com/gitlab-org/api/client-go"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Options configure a Service.
type Options struct {
	Config
	// SessionDir finds a session's working directory (SessionDirs adapts
	// the session manager); nil: requests must not name a session.
	SessionDir func(ctx context.Context, id string) (string, error)
	// Home is what "~/" in a working_directory means; default $HOME.
	Home string
	// Git is the git binary; default "git" on PATH.
	Git string
	// HTTPClient, if set, carries the calls to GitLab (tests, proxies).
	HTTPClient *http.Client
	// TracerProvider, if set, gives every HTTP request to GitLab a client
	// span under the gRPC call's (trace.go); no trace context is sent to
	// GitLab.
	TracerProvider trace.TracerProvider
	// Logger gets failed GitLab calls (never the token); default: discard.
	Logger *slog.Logger
}

// Service implements GitLabService.
type Service struct {
	pb.UnimplementedGitLabServiceServer
	opts   Options
	base   *url.URL
	client *gl.Client
}

var _ pb.GitLabServiceServer = (*Service)(nil)

// New returns the service for the GitLab opts names; the token (file) is
// read once, here.
func New(opts Options) (*Service, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	base, _ := baseURL(opts.URL)
	token, err := opts.token()
	if err != nil {
		return nil, err
	}
	c, err := newClient(opts.Config, base, token, tracedClient(opts.HTTPClient, opts.TracerProvider))
	if err != nil {
		return nil, err
	}
	return &Service{opts: opts, base: base, client: c}, nil
}

// call runs one RPC's GitLab work under the configured timeout and maps
// its failure to a status, logging it.
func call[T any](ctx context.Context, s *Service, req interface{ GetProject() *pb.GitLabProject }, what func(project string) string, do func(ctx context.Context, project string) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var zero T
	project, err := s.project(ctx, req.GetProject())
	if err != nil {
		s.opts.Logger.Debug("gitlab: no project", "err", err)
		return zero, toStatus(err, "the project", s.base.String())
	}
	out, err := do(ctx, project)
	if err != nil {
		st := toStatus(err, what(project), s.base.String())
		s.opts.Logger.Warn("gitlab: call failed", "gitlab", s.base.String(), "project", project, "about", what(project), "err", st)
		return zero, st
	}
	return out, nil
}

// ListMergeRequests lists a project's merge requests, most recently
// updated first.
func (s *Service) ListMergeRequests(ctx context.Context, req *pb.ListMrsRequest) (*pb.ListMrsResponse, error) {
	return call(ctx, s, req, func(p string) string { return "merge requests of " + p }, func(ctx context.Context, project string) (*pb.ListMrsResponse, error) {
		opt := &gl.ListProjectMergeRequestsOptions{OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc")}
		if st := mrStateFilter(req.GetState()); st != "" {
			opt.State = gl.Ptr(st)
		}
		if a := req.GetAuthor(); a != "" {
			opt.AuthorUsername = gl.Ptr(a)
		}
		items, total, err := collect(ctx, req.GetLimit(), req.GetOffset(), func(page gl.ListOptions) ([]*gl.BasicMergeRequest, *gl.Response, error) {
			opt.ListOptions = page
			return s.client.MergeRequests.ListProjectMergeRequests(project, opt, gl.WithContext(ctx))
		})
		if err != nil {
			return nil, err
		}
		out := &pb.ListMrsResponse{Total: total}
		for _, mr := range items {
			out.MergeRequests = append(out.MergeRequests, basicMR(project, mr))
		}
		return out, nil
	})
}

// GetMergeRequest returns one merge request with its head pipeline's status.
func (s *Service) GetMergeRequest(ctx context.Context, req *pb.GetMrRequest) (*pb.MergeRequestInfo, error) {
	return call(ctx, s, req, func(p string) string { return fmt.Sprintf("merge request !%d of %s", req.GetIid(), p) }, func(ctx context.Context, project string) (*pb.MergeRequestInfo, error) {
		if req.GetIid() == 0 {
			return nil, fmt.Errorf("%w: name the merge request (iid)", errNoProject)
		}
		mr, _, err := s.client.MergeRequests.GetMergeRequest(project, int64(req.GetIid()), nil, gl.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		out := basicMR(project, &mr.BasicMergeRequest)
		if mr.HeadPipeline != nil {
			out.PipelineStatus = pipelineStatus(mr.HeadPipeline.Status)
		}
		return out, nil
	})
}

// ListPipelines lists a project's pipelines, newest first.
func (s *Service) ListPipelines(ctx context.Context, req *pb.ListPipelinesRequest) (*pb.ListPipelinesResponse, error) {
	return call(ctx, s, req, func(p string) string { return "pipelines of " + p }, func(ctx context.Context, project string) (*pb.ListPipelinesResponse, error) {
		opt := &gl.ListProjectPipelinesOptions{OrderBy: gl.Ptr("id"), Sort: gl.Ptr("desc")}
		if r := req.GetRef(); r != "" {
			opt.Ref = gl.Ptr(r)
		}
		if st := statusFilter(req.GetStatus()); st != "" {
			opt.Status = gl.Ptr(gl.BuildStateValue(st))
		}
		items, total, err := collect(ctx, req.GetLimit(), req.GetOffset(), func(page gl.ListOptions) ([]*gl.PipelineInfo, *gl.Response, error) {
			opt.ListOptions = page
			return s.client.Pipelines.ListProjectPipelines(project, opt, gl.WithContext(ctx))
		})
		if err != nil {
			return nil, err
		}
		out := &pb.ListPipelinesResponse{Total: total}
		for _, p := range items {
			out.Pipelines = append(out.Pipelines, pipelineInfo(project, p))
		}
		return out, nil
	})
}

// maxJobs bounds the jobs of one pipeline returned.
const maxJobs = maxLimit

// GetPipelineJobs lists every job of a pipeline, oldest first (stage order).
func (s *Service) GetPipelineJobs(ctx context.Context, req *pb.GetJobsRequest) (*pb.GetJobsResponse, error) {
	return call(ctx, s, req, func(p string) string { return fmt.Sprintf("pipeline %d of %s", req.GetPipelineId(), p) }, func(ctx context.Context, project string) (*pb.GetJobsResponse, error) {
		if req.GetPipelineId() == 0 {
			return nil, fmt.Errorf("%w: name the pipeline (pipeline_id)", errNoProject)
		}
		opt := &gl.ListJobsOptions{}
		items, _, err := collect(ctx, maxJobs, 0, func(page gl.ListOptions) ([]*gl.Job, *gl.Response, error) {
			opt.ListOptions = page
			return s.client.Jobs.ListPipelineJobs(project, int64(req.GetPipelineId()), opt, gl.WithContext(ctx))
		})
		if err != nil {
			return nil, err
		}
		// GitLab lists newest first; jobs are created in stage order.
		slices.SortStableFunc(items, func(a, b *gl.Job) int { return int(a.ID - b.ID) })
		out := &pb.GetJobsResponse{}
		for _, j := range items {
			out.Jobs = append(out.Jobs, jobInfo(j))
		}
		return out, nil
	})
}

// ListIssues lists a project's issues, most recently updated first.
func (s *Service) ListIssues(ctx context.Context, req *pb.ListIssuesRequest) (*pb.ListIssuesResponse, error) {
	return call(ctx, s, req, func(p string) string { return "issues of " + p }, func(ctx context.Context, project string) (*pb.ListIssuesResponse, error) {
		opt := &gl.ListProjectIssuesOptions{OrderBy: gl.Ptr("updated_at"), Sort: gl.Ptr("desc")}
		switch req.GetState() {
		case pb.IssueState_ISSUE_STATE_OPENED:
			opt.State = gl.Ptr("opened")
		case pb.IssueState_ISSUE_STATE_CLOSED:
			opt.State = gl.Ptr("closed")
		}
		if l := req.GetLabels(); len(l) > 0 {
			opt.Labels = (*gl.LabelOptions)(&l)
		}
		if a := req.GetAssignee(); a != "" {
			opt.AssigneeUsername = gl.Ptr(a)
		}
		items, total, err := collect(ctx, req.GetLimit(), req.GetOffset(), func(page gl.ListOptions) ([]*gl.Issue, *gl.Response, error) {
			opt.ListOptions = page
			return s.client.Issues.ListProjectIssues(project, opt, gl.WithContext(ctx))
		})
		if err != nil {
			return nil, err
		}
		out := &pb.ListIssuesResponse{Total: total}
		for _, is := range items {
			out.Issues = append(out.Issues, issueInfo(project, is))
		}
		return out, nil
	})
}
