package fakegitlab

import (
	"fmt"
	"strings"
	"time"
)

// SampleProject returns project path (ID id) with n merge requests, n
// pipelines, n issues and, in every pipeline, a build, a test and a deploy
// job, the first of each modelled on the examples of GitLab's API docs.
// Times count up from 2026-01-01 so that newer items have higher IDs.
// Job 1000*p+3 (the test job of pipeline p) failed and has a log of
// logLines lines.
func SampleProject(id int64, path string, n, logLines int) *Project {
	web := "https://gitlab.example.com/" + path
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }
	admin := User{ID: 1, Username: "admin", Name: "Administrator", State: "active", WebURL: "https://gitlab.example.com/admin"}
	dev := User{ID: 2, Username: "dev", Name: "Dev Eloper", State: "active", WebURL: "https://gitlab.example.com/dev"}
	p := &Project{ID: id, PathWithNamespace: path}
	mrStates := []string{"opened", "merged", "closed", "opened"}
	plStatus := []string{"success", "failed", "running", "canceled"}
	for i := 1; i <= n; i++ {
		author := admin
		if i%2 == 0 {
			author = dev
		}
		dur := int64(60 + i)
		pl := Pipeline{
			ID: int64(i), IID: int64(i), ProjectID: id, SHA: fmt.Sprintf("%040x", i), Ref: "main",
			Status: plStatus[i%len(plStatus)], Source: "push", CreatedAt: at(i), UpdatedAt: at(i).Add(time.Minute),
			WebURL: fmt.Sprintf("%s/-/pipelines/%d", web, i), Duration: &dur,
		}
		if i%2 == 0 {
			pl.Ref, pl.Source = fmt.Sprintf("feature-%d", i), "merge_request_event"
		}
		p.Pipelines = append(p.Pipelines, pl)
		headPL := pl
		mr := MergeRequest{
			ID: int64(100 + i), IID: int64(i), ProjectID: id, Title: fmt.Sprintf("test%d", i),
			Description: "fixed login page css paddings", State: mrStates[i%len(mrStates)],
			CreatedAt: at(i), UpdatedAt: at(i).Add(2 * time.Minute), TargetBranch: "main",
			SourceBranch: fmt.Sprintf("feature-%d", i), Author: author, Labels: []string{"Community contribution", "Manage"},
			Draft: i%5 == 0, WorkInProgress: i%5 == 0, MergeStatus: "can_be_merged", DetailedMergeStatus: "mergeable",
			SHA: pl.SHA, WebURL: fmt.Sprintf("%s/-/merge_requests/%d", web, i), HeadPipeline: &headPL,
		}
		if mr.State == "merged" {
			m := at(i).Add(time.Hour)
			mr.MergedAt = &m
		}
		p.MergeRequests = append(p.MergeRequests, mr)
		issue := Issue{
			ID: int64(200 + i), IID: int64(i), ProjectID: id, Title: fmt.Sprintf("Issue %d: consequatur vero maxime deserunt laboriosam est voluptas dolorem", i),
			Description: "Ratione dolores corrupti mollitia soluta quia.", State: "opened",
			CreatedAt: at(i), UpdatedAt: at(i).Add(3 * time.Minute), Labels: []string{"foo"}, Author: admin,
			Assignees: []User{}, WebURL: fmt.Sprintf("%s/-/issues/%d", web, i),
		}
		if i%3 == 0 {
			c := at(i).Add(time.Hour)
			issue.State, issue.ClosedAt = "closed", &c
			issue.Labels = append(issue.Labels, "bug")
		}
		if i%2 == 0 {
			issue.Assignees, issue.Assignee = []User{dev}, &dev
		}
		p.Issues = append(p.Issues, issue)
		for k, stage := range []string{"build", "test", "deploy"} {
			start, end := at(i).Add(time.Duration(k)*time.Minute), at(i).Add(time.Duration(k+1)*time.Minute)
			d, q := 60.5, 0.25
			j := Job{
				ID: int64(1000*i + k + 2), Status: "success", Stage: stage, Name: stage + "-job", Ref: pl.Ref,
				CreatedAt: at(i), StartedAt: &start, FinishedAt: &end, Duration: &d, QueuedDuration: &q,
				WebURL: fmt.Sprintf("%s/-/jobs/%d", web, 1000*i+k+2), User: &admin,
				Pipeline: JobPipeline{ID: pl.ID, ProjectID: id, Ref: pl.Ref, SHA: pl.SHA, Status: pl.Status},
				Trace:    fmt.Sprintf("Running with gitlab-runner 17.0.0\n$ make %s\nok\nJob succeeded\n", stage),
			}
			if stage == "test" {
				j.Status, j.FailureReason, j.AllowFailure = "failed", "script_failure", i%2 == 0
				j.Trace = SampleLog(logLines)
			}
			p.Jobs = append(p.Jobs, j)
		}
	}
	return p
}

// SampleLog is a job log of n lines, "line 1" ... "line n" after a runner
// header with ANSI colours, as GitLab runners write them.
func SampleLog(n int) string {
	var b strings.Builder
	b.WriteString("\x1b[0KRunning with gitlab-runner 17.0.0 (44feccdf)\x1b[0;m\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d: ✓ ok\n", i)
	}
	b.WriteString("\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m\n")
	return b.String()
}
