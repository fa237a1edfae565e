package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// gitlabFlags name the project of a gitlab command.
type gitlabFlags struct {
	project, dir, session string
}

func (f *gitlabFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.project, "project", "", "GitLab project (group/repo or numeric ID)")
	pf.StringVar(&f.dir, "dir", "", "checkout on the machine whose git remote names the project (default: this directory, with a local agent)")
	pf.StringVar(&f.session, "session", "", "session whose working directory names the project")
}

// target is the GitLabProject of the flags: with none, this directory when
// the agent is on this machine.
func (f *gitlabFlags) target(g *globals) (*pb.GitLabProject, error) {
	p := &pb.GitLabProject{Project: f.project, WorkingDirectory: f.dir, SessionId: f.session}
	if f.project != "" || f.dir != "" || f.session != "" {
		return p, nil
	}
	if _, viaRelay, err := g.relay(); err != nil {
		return nil, err
	} else if viaRelay {
		return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("through a relay, name the project: --project group/repo, --session ID or --dir PATH-ON-THE-MACHINE")}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("this directory: %w", err)}
	}
	p.WorkingDirectory, _ = filepath.Abs(wd)
	return p, nil
}

// gitlabCall dials, runs fn with the GitLabService client and the
// project, and closes.
func gitlabCall(cmd *cobra.Command, g *globals, f *gitlabFlags, fn func(context.Context, pb.GitLabServiceClient, *pb.GitLabProject) error) error {
	p, err := f.target(g)
	if err != nil {
		return err
	}
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(cmd.Context(), pb.NewGitLabServiceClient(conn), p)
}

func newGitLabCmd(g *globals) *cobra.Command {
	f := &gitlabFlags{}
	cmd := &cobra.Command{
		Use:   "gitlab",
		Short: "Merge requests, pipelines, jobs, job logs and issues of a GitLab project",
		Long: `Read the GitLab project of a checkout on the machine: the agent finds it from the
git remote (the one on the agent's gitlab-url), and calls GitLab with the
agent's token. Name the project with --project, --dir or --session; with a
local agent and none of them, this directory is used. See docs/gitlab.md.`,
	}
	f.register(cmd)
	cmd.AddCommand(newGitLabMRsCmd(g, f), newGitLabMRCmd(g, f), newGitLabPipelinesCmd(g, f), newGitLabJobsCmd(g, f),
		newGitLabLogCmd(g, f), newGitLabIssuesCmd(g, f))
	return cmd
}

func when(t interface{ AsTime() time.Time }) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().Local().Format(time.DateTime)
}

// enumName is an enum value without its prefix, lower-cased: "opened".
func enumName(s fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), prefix))
}

// page prints "N of TOTAL" to stderr.
func page(cmd *cobra.Command, n int, total uint32, what string) {
	if total > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d %s\n", n, total, what)
	} else {
		fmt.Fprintf(cmd.ErrOrStderr(), "%d %s\n", n, what)
	}
}

func newGitLabMRsCmd(g *globals, f *gitlabFlags) *cobra.Command {
	var state, author string
	var limit, offset uint32
	cmd := &cobra.Command{
		Use:   "mrs",
		Short: "List merge requests, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ok := pb.MergeRequestState_value["MERGE_REQUEST_STATE_"+strings.ToUpper(state)]
			if !ok && state != "all" {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--state %q: want opened, closed, merged, locked or all", state)}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				resp, err := c.ListMergeRequests(ctx, &pb.ListMrsRequest{Project: p, State: pb.MergeRequestState(st), Author: author, Limit: limit, Offset: offset})
				if err != nil {
					return fmt.Errorf("list merge requests: %w", err)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "MR\tSTATE\tAUTHOR\tBRANCH\tUPDATED\tTITLE")
				for _, mr := range resp.MergeRequests {
					title := mr.Title
					if mr.Draft {
						title = "Draft: " + strings.TrimPrefix(title, "Draft: ")
					}
					fmt.Fprintf(w, "!%d\t%s\t%s\t%s -> %s\t%s\t%s\n", mr.Iid, enumName(mr.State, "MERGE_REQUEST_STATE_"), mr.Author,
						mr.SourceBranch, mr.TargetBranch, when(mr.UpdatedAt), title)
				}
				w.Flush()
				page(cmd, len(resp.MergeRequests), resp.Total, "merge requests")
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "opened", "opened, closed, merged, locked or all")
	cmd.Flags().StringVar(&author, "author", "", "only merge requests by this username")
	cmd.Flags().Uint32Var(&limit, "limit", 20, "at most this many")
	cmd.Flags().Uint32Var(&offset, "offset", 0, "skip this many")
	return cmd
}

func newGitLabMRCmd(g *globals, f *gitlabFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "mr IID",
		Short: "Show a merge request (its number, as in !12)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var iid uint64
			if _, err := fmt.Sscan(strings.TrimPrefix(args[0], "!"), &iid); err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("merge request %q: want its number, e.g. 12 or !12", args[0])}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				mr, err := c.GetMergeRequest(ctx, &pb.GetMrRequest{Project: p, Iid: iid})
				if err != nil {
					return fmt.Errorf("get merge request: %w", err)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "!%d %s\n", mr.Iid, mr.Title)
				fmt.Fprintf(out, "State:    %s (draft: %v, merge status: %s)\n", enumName(mr.State, "MERGE_REQUEST_STATE_"), mr.Draft, mr.MergeStatus)
				fmt.Fprintf(out, "Author:   %s\nBranches: %s -> %s\n", mr.Author, mr.SourceBranch, mr.TargetBranch)
				fmt.Fprintf(out, "Pipeline: %s\nLabels:   %s\n", enumName(mr.PipelineStatus, "PIPELINE_STATUS_"), strings.Join(mr.Labels, ", "))
				fmt.Fprintf(out, "Created:  %s\nUpdated:  %s\nURL:      %s\n", when(mr.CreatedAt), when(mr.UpdatedAt), mr.WebUrl)
				if mr.Description != "" {
					fmt.Fprintf(out, "\n%s\n", mr.Description)
				}
				return nil
			})
		},
	}
}

func newGitLabPipelinesCmd(g *globals, f *gitlabFlags) *cobra.Command {
	var ref, status string
	var limit, offset uint32
	cmd := &cobra.Command{
		Use:   "pipelines",
		Short: "List pipelines, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ok := pb.PipelineStatus_value["PIPELINE_STATUS_"+strings.ToUpper(status)]
			if !ok && status != "" {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--status %q: want a GitLab status such as running, success or failed", status)}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				resp, err := c.ListPipelines(ctx, &pb.ListPipelinesRequest{Project: p, Ref: ref, Status: pb.PipelineStatus(st), Limit: limit, Offset: offset})
				if err != nil {
					return fmt.Errorf("list pipelines: %w", err)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tSTATUS\tREF\tSHA\tSOURCE\tCREATED")
				for _, pl := range resp.Pipelines {
					fmt.Fprintf(w, "%d\t%s\t%s\t%.8s\t%s\t%s\n", pl.Id, enumName(pl.Status, "PIPELINE_STATUS_"), pl.Ref, pl.Sha, pl.Source, when(pl.CreatedAt))
				}
				w.Flush()
				page(cmd, len(resp.Pipelines), resp.Total, "pipelines")
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "only pipelines of this branch or tag")
	cmd.Flags().StringVar(&status, "status", "", "only pipelines in this status (running, success, failed, ...)")
	cmd.Flags().Uint32Var(&limit, "limit", 20, "at most this many")
	cmd.Flags().Uint32Var(&offset, "offset", 0, "skip this many")
	return cmd
}

func newGitLabJobsCmd(g *globals, f *gitlabFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "jobs PIPELINE_ID",
		Short: "List the jobs of a pipeline, in stage order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id uint64
			if _, err := fmt.Sscan(args[0], &id); err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("pipeline %q: want its ID", args[0])}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				resp, err := c.GetPipelineJobs(ctx, &pb.GetJobsRequest{Project: p, PipelineId: id})
				if err != nil {
					return fmt.Errorf("list jobs: %w", err)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tSTAGE\tNAME\tSTATUS\tDURATION\tFAILURE")
				for _, j := range resp.Jobs {
					st := enumName(j.Status, "PIPELINE_STATUS_")
					if j.AllowFailure && j.Status == pb.PipelineStatus_PIPELINE_STATUS_FAILED {
						st += " (allowed)"
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", j.Id, j.Stage, j.Name, st,
						(time.Duration(j.DurationSecs * float64(time.Second))).Round(time.Second), j.FailureReason)
				}
				return w.Flush()
			})
		},
	}
}

// logPoll is how often `gitlab log --follow` asks for more of a running job.
const logPoll = 2 * time.Second

func newGitLabLogCmd(g *globals, f *gitlabFlags) *cobra.Command {
	var tail uint32
	var follow bool
	cmd := &cobra.Command{
		Use:   "log JOB_ID",
		Short: "Print a job's log (ANSI colours kept)",
		Long: `Print a job's log. A log larger than one answer of the agent comes in chunks,
fetched one after the other. With --tail, only the last lines; when even those
are more than one answer, the command says how much was left out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id uint64
			if _, err := fmt.Sscan(args[0], &id); err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("job %q: want its ID", args[0])}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				return printJobLog(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), c, &pb.GetJobLogRequest{Project: p, JobId: id, TailLines: tail}, follow)
			})
		},
	}
	cmd.Flags().Uint32Var(&tail, "tail", 0, "only the last N lines")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing while the job runs")
	return cmd
}

// printJobLog prints the log req selects, chunk after chunk; with follow,
// until the job has finished.
func printJobLog(ctx context.Context, out, errOut io.Writer, c pb.GitLabServiceClient, req *pb.GetJobLogRequest, follow bool) error {
	first := true
	for {
		resp, err := c.GetJobLog(ctx, req)
		if err != nil {
			return fmt.Errorf("job log: %w", err)
		}
		if first && req.TailLines > 0 {
			if start := resp.NextOffset - uint64(len(resp.Content)); start > 0 && strings.Count(resp.Content, "\n") < int(req.TailLines) && start < resp.TotalBytes {
				fmt.Fprintf(errOut, "(log truncated: showing the last %d of %d bytes; the earlier lines were left out)\n", len(resp.Content), resp.TotalBytes)
			}
		}
		first = false
		if _, err := io.WriteString(out, resp.Content); err != nil {
			return err
		}
		req.Offset, req.TailLines = resp.NextOffset, 0
		if resp.NextOffset < resp.TotalBytes {
			continue
		}
		if !follow || resp.Complete {
			return nil
		}
		t := time.NewTimer(logPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func newGitLabIssuesCmd(g *globals, f *gitlabFlags) *cobra.Command {
	var state, assignee string
	var labels []string
	var limit, offset uint32
	cmd := &cobra.Command{
		Use:   "issues",
		Short: "List issues, most recently updated first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ok := pb.IssueState_value["ISSUE_STATE_"+strings.ToUpper(state)]
			if !ok && state != "all" {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--state %q: want opened, closed or all", state)}
			}
			return gitlabCall(cmd, g, f, func(ctx context.Context, c pb.GitLabServiceClient, p *pb.GitLabProject) error {
				resp, err := c.ListIssues(ctx, &pb.ListIssuesRequest{Project: p, State: pb.IssueState(st), Labels: labels, Assignee: assignee, Limit: limit, Offset: offset})
				if err != nil {
					return fmt.Errorf("list issues: %w", err)
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ISSUE\tSTATE\tAUTHOR\tASSIGNEES\tLABELS\tUPDATED\tTITLE")
				for _, is := range resp.Issues {
					fmt.Fprintf(w, "#%d\t%s\t%s\t%s\t%s\t%s\t%s\n", is.Iid, enumName(is.State, "ISSUE_STATE_"), is.Author,
						strings.Join(is.Assignees, ","), strings.Join(is.Labels, ","), when(is.UpdatedAt), is.Title)
				}
				w.Flush()
				page(cmd, len(resp.Issues), resp.Total, "issues")
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "opened", "opened, closed or all")
	cmd.Flags().StringSliceVar(&labels, "label", nil, "only issues with this label (repeatable: all of them)")
	cmd.Flags().StringVar(&assignee, "assignee", "", "only issues assigned to this username")
	cmd.Flags().Uint32Var(&limit, "limit", 20, "at most this many")
	cmd.Flags().Uint32Var(&offset, "offset", 0, "skip this many")
	return cmd
}
