package gitlab

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakegitlab"
)

const testToken = "glpat-TESTTOKEN-never-logged-42"

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is a fake GitLab with project group/repo (id 7) and a service
// pointed at it, logging at debug level into log.
type fixture struct {
	fake *fakegitlab.Server
	svc  *Service
	log  *syncBuffer
}

func newFixture(t *testing.T, n int, mod func(*Options)) *fixture {
	t.Helper()
	fake, err := fakegitlab.Start(fakegitlab.Config{Token: testToken, Projects: []*fakegitlab.Project{fakegitlab.SampleProject(7, "group/repo", n, 50)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	f := &fixture{fake: fake, log: &syncBuffer{}}
	opts := Options{Config: Config{URL: fake.URL(), Token: testToken, MaxRetryWait: 2 * time.Second},
		Logger: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&opts)
	}
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	t.Cleanup(func() {
		if strings.Contains(f.log.String(), testToken) {
			t.Errorf("the token appears in the log:\n%s", f.log.String())
		}
	})
	return f
}

var repo = &pb.GitLabProject{Project: "group/repo"}

func wantStatus(t *testing.T, err error, code codes.Code, betcode string) {
	t.Helper()
	if status.Code(err) != code || server.BetCodeCode(err) != betcode {
		t.Fatalf("err = %v (%s), want %s/%s", err, server.BetCodeCode(err), code, betcode)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Fatalf("error shows the token: %v", err)
	}
}

func TestListsPageThroughSeveralPages(t *testing.T) {
	f := newFixture(t, 260, nil)
	ctx := t.Context()
	tests := []struct {
		name          string
		limit, offset uint32
		wantFirst     uint64 // iid of the first MR (newest first: iid 260 is the newest)
		wantN         int
		wantRequests  int
	}{
		{name: "default page", wantFirst: 260, wantN: 20, wantRequests: 1},
		{name: "aligned", limit: 10, offset: 20, wantFirst: 240, wantN: 10, wantRequests: 1},
		{name: "unaligned spans two pages", limit: 10, offset: 15, wantFirst: 245, wantN: 10, wantRequests: 2},
		{name: "more than per_page", limit: 250, wantFirst: 260, wantN: 250, wantRequests: 3},
		{name: "past the end", limit: 50, offset: 240, wantFirst: 20, wantN: 20, wantRequests: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.fake.Requests())
			resp, err := f.svc.ListMergeRequests(ctx, &pb.ListMrsRequest{Project: repo, Limit: tc.limit, Offset: tc.offset})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.MergeRequests) != tc.wantN || resp.Total != 260 {
				t.Fatalf("got %d MRs of %d, want %d of 260", len(resp.MergeRequests), resp.Total, tc.wantN)
			}
			if got := resp.MergeRequests[0].Iid; got != tc.wantFirst {
				t.Fatalf("first iid %d, want %d", got, tc.wantFirst)
			}
			for i := 1; i < len(resp.MergeRequests); i++ {
				if resp.MergeRequests[i].Iid != resp.MergeRequests[i-1].Iid-1 {
					t.Fatalf("MR %d has iid %d after %d: pages overlap or skip", i, resp.MergeRequests[i].Iid, resp.MergeRequests[i-1].Iid)
				}
			}
			if n := len(f.fake.Requests()) - before; n != tc.wantRequests {
				t.Fatalf("%d GitLab requests, want %d", n, tc.wantRequests)
			}
		})
	}
	reqs := f.fake.Requests()
	if last := reqs[len(reqs)-1]; last.Token != testToken || last.Query.Get("order_by") != "updated_at" {
		t.Fatalf("request %+v: want the token and order_by=updated_at", last)
	}
}

func TestFilteredListsAndDetails(t *testing.T) {
	f := newFixture(t, 12, nil)
	ctx := t.Context()
	mrs, err := f.svc.ListMergeRequests(ctx, &pb.ListMrsRequest{Project: repo, State: pb.MergeRequestState_MERGE_REQUEST_STATE_MERGED, Author: "admin", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, mr := range mrs.MergeRequests {
		if mr.State != pb.MergeRequestState_MERGE_REQUEST_STATE_MERGED || mr.Author != "admin" || mr.Project != "group/repo" {
			t.Fatalf("filter let through %v", mr)
		}
	}
	if len(mrs.MergeRequests) != 3 { // iids 1, 5, 9
		t.Fatalf("%d merged MRs by admin, want 3", len(mrs.MergeRequests))
	}
	mr, err := f.svc.GetMergeRequest(ctx, &pb.GetMrRequest{Project: &pb.GitLabProject{Project: "7"}, Iid: 2})
	if err != nil {
		t.Fatal(err)
	}
	if mr.Iid != 2 || mr.SourceBranch != "feature-2" || mr.PipelineStatus != pb.PipelineStatus_PIPELINE_STATUS_RUNNING || mr.MergeStatus != "mergeable" || mr.CreatedAt == nil {
		t.Fatalf("MR = %v", mr)
	}
	pls, err := f.svc.ListPipelines(ctx, &pb.ListPipelinesRequest{Project: repo, Status: pb.PipelineStatus_PIPELINE_STATUS_FAILED})
	if err != nil {
		t.Fatal(err)
	}
	if len(pls.Pipelines) != 3 || pls.Pipelines[0].Id != 9 || pls.Pipelines[0].Status != pb.PipelineStatus_PIPELINE_STATUS_FAILED {
		t.Fatalf("failed pipelines = %v", pls.Pipelines)
	}
	jobs, err := f.svc.GetPipelineJobs(ctx, &pb.GetJobsRequest{Project: repo, PipelineId: 9})
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, j := range jobs.Jobs {
		stages = append(stages, j.Stage)
	}
	if strings.Join(stages, ",") != "build,test,deploy" || jobs.Jobs[1].FailureReason != "script_failure" || jobs.Jobs[1].DurationSecs != 60.5 {
		t.Fatalf("jobs = %v", jobs.Jobs)
	}
	issues, err := f.svc.ListIssues(ctx, &pb.ListIssuesRequest{Project: repo, State: pb.IssueState_ISSUE_STATE_CLOSED, Labels: []string{"foo", "bug"}, Assignee: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if len(issues.Issues) != 2 { // iids 6 and 12: closed (i%3==0) and assigned (even)
		t.Fatalf("issues = %v", issues.Issues)
	}
	if is := issues.Issues[0]; is.Iid != 12 || is.ClosedAt == nil || is.Assignees[0] != "dev" || is.State != pb.IssueState_ISSUE_STATE_CLOSED {
		t.Fatalf("issue = %v", is)
	}
}

func TestJobLogLargerThanOneMessage(t *testing.T) {
	const chunk = 4096
	f := newFixture(t, 2, func(o *Options) { o.LogChunk = chunk })
	ctx := t.Context()
	const jobID = 2003 // pipeline 2's test job
	log := fakegitlab.SampleLog(5000)
	if !f.fake.SetJob(jobID, "running", log) {
		t.Fatal("no job")
	}
	var got strings.Builder
	var offset uint64
	chunks := 0
	for {
		resp, err := f.svc.GetJobLog(ctx, &pb.GetJobLogRequest{Project: repo, JobId: jobID, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if len(resp.Content) > chunk || resp.TotalBytes != uint64(len(log)) || resp.Complete {
			t.Fatalf("chunk %d: %d bytes, total %d, complete %v", chunks, len(resp.Content), resp.TotalBytes, resp.Complete)
		}
		got.WriteString(resp.Content)
		offset = resp.NextOffset
		if offset >= resp.TotalBytes {
			break
		}
		if !strings.HasSuffix(resp.Content, "\n") {
			t.Fatalf("chunk %d does not end at a line: %q", chunks, resp.Content[len(resp.Content)-20:])
		}
	}
	if got.String() != log || chunks < len(log)/chunk {
		t.Fatalf("reassembled %d bytes in %d chunks, want the %d-byte log", got.Len(), chunks, len(log))
	}
	// The job finishes and its log grows: following from the offset
	// gets the rest and says complete.
	f.fake.SetJob(jobID, "failed", log+"Cleaning up\n")
	resp, err := f.svc.GetJobLog(ctx, &pb.GetJobLogRequest{Project: repo, JobId: jobID, Offset: offset})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Cleaning up\n" || !resp.Complete {
		t.Fatalf("follow = %q complete %v", resp.Content, resp.Complete)
	}
	// The last lines.
	resp, err = f.svc.GetJobLog(ctx, &pb.GetJobLogRequest{Project: repo, JobId: jobID, TailLines: 2})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m\nCleaning up\n" {
		t.Fatalf("tail = %q", resp.Content)
	}
	// More last lines than fit: the end of the log, from a line start.
	resp, err = f.svc.GetJobLog(ctx, &pb.GetJobLogRequest{Project: repo, JobId: jobID, TailLines: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Content) > chunk || !strings.HasPrefix(resp.Content, "line ") || resp.NextOffset != resp.TotalBytes {
		t.Fatalf("big tail: %d bytes starting %q", len(resp.Content), resp.Content[:10])
	}
}

func TestLogWindow(t *testing.T) {
	tests := []struct {
		name         string
		log          string
		offset       uint64
		tail         uint32
		chunk        int
		wantS, wantE int
	}{
		{name: "all", log: "a\nb\n", chunk: 10, wantS: 0, wantE: 4},
		{name: "offset past end", log: "a\nb\n", offset: 9, chunk: 10, wantS: 4, wantE: 4},
		{name: "cut at newline", log: "aaaa\nbbbb\n", chunk: 7, wantS: 0, wantE: 5},
		{name: "cut at rune", log: "ééééé", chunk: 5, wantS: 0, wantE: 4},
		{name: "tail 1", log: "a\nb\nc\n", tail: 1, chunk: 10, wantS: 4, wantE: 6},
		{name: "tail unterminated", log: "a\nb\nc", tail: 1, chunk: 10, wantS: 4, wantE: 5},
		{name: "tail more than lines", log: "a\nb\n", tail: 9, chunk: 10, wantS: 0, wantE: 4},
		{name: "tail after offset", log: "a\nb\nc\n", offset: 2, tail: 9, chunk: 10, wantS: 2, wantE: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, e := logWindow([]byte(tc.log), tc.offset, tc.tail, tc.chunk)
			if s != tc.wantS || e != tc.wantE {
				t.Fatalf("logWindow = [%d,%d), want [%d,%d)", s, e, tc.wantS, tc.wantE)
			}
		})
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name      string
		fail      []fakegitlab.Failure
		token     string
		project   string
		timeout   time.Duration
		wantCode  codes.Code
		wantBC    string
		wantRetry string // retry_after_ms
		wantReqs  int
	}{
		{name: "401 bad token", token: "glpat-wrong", wantCode: codes.PermissionDenied, wantBC: CodeAuthFailed, wantReqs: 1},
		{name: "403", fail: []fakegitlab.Failure{{Status: 403}}, wantCode: codes.PermissionDenied, wantBC: CodeForbidden, wantReqs: 1},
		{name: "404 project", project: "group/nope", wantCode: codes.NotFound, wantBC: CodeNotFound, wantReqs: 1},
		{name: "429 then served", fail: []fakegitlab.Failure{{Status: 429, RetryAfter: "0"}, {Status: 429, RetryAfter: "0"}}, wantReqs: 3},
		{name: "429 retries spent", fail: []fakegitlab.Failure{{Status: 429, RetryAfter: "1"}, {Status: 429, RetryAfter: "1"}, {Status: 429, RetryAfter: "1"}, {Status: 429, RetryAfter: "1"}},
			wantCode: codes.ResourceExhausted, wantBC: CodeRateLimited, wantRetry: "1000", wantReqs: 4},
		{name: "429 longer than allowed", fail: []fakegitlab.Failure{{Status: 429, RetryAfter: "120"}}, wantCode: codes.ResourceExhausted, wantBC: CodeRateLimited, wantRetry: "120000", wantReqs: 1},
		{name: "429 past the deadline", timeout: 500 * time.Millisecond, fail: []fakegitlab.Failure{{Status: 429, RetryAfter: "1"}}, wantCode: codes.ResourceExhausted, wantBC: CodeRateLimited, wantRetry: "1000", wantReqs: 1},
		{name: "503 then served", fail: []fakegitlab.Failure{{Status: 503}}, wantReqs: 2},
		{name: "500", fail: []fakegitlab.Failure{{Status: 500}}, wantCode: codes.Unavailable, wantBC: CodeUnavailable, wantReqs: 1},
		{name: "400", fail: []fakegitlab.Failure{{Status: 400, Body: `{"message":"400 Bad request - state is invalid"}`}}, wantCode: codes.InvalidArgument, wantBC: CodeRejected, wantReqs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 3, func(o *Options) {
				if tc.token != "" {
					o.Token = tc.token
				}
				if tc.timeout > 0 {
					o.Timeout = tc.timeout
				}
			})
			f.fake.FailNext(tc.fail...)
			p := tc.project
			if p == "" {
				p = "group/repo"
			}
			_, err := f.svc.ListPipelines(t.Context(), &pb.ListPipelinesRequest{Project: &pb.GitLabProject{Project: p}})
			if tc.wantCode == codes.OK {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				wantStatus(t, err, tc.wantCode, tc.wantBC)
				if got := server.ErrorDetails(err)["retry_after_ms"]; got != tc.wantRetry {
					t.Fatalf("retry_after_ms = %q, want %q", got, tc.wantRetry)
				}
			}
			if n := len(f.fake.Requests()); n != tc.wantReqs {
				t.Fatalf("%d requests, want %d", n, tc.wantReqs)
			}
		})
	}
}

func TestUnreachableGitLab(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	log := &syncBuffer{}
	svc, err := New(Options{Config: Config{URL: "http://" + addr, Token: testToken}, Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ListIssues(t.Context(), &pb.ListIssuesRequest{Project: repo})
	wantStatus(t, err, codes.Unavailable, CodeUnreachable)
	if !strings.Contains(err.Error(), addr) || strings.Contains(log.String(), testToken) {
		t.Fatalf("err = %v; log:\n%s", err, log)
	}
}

// git runs git in dir.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestProjectFromGitRemote(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: install git")
	}
	f := newFixture(t, 3, nil)
	host := strings.TrimPrefix(f.fake.URL(), "http://")
	hostname, _, _ := net.SplitHostPort(host)
	root := t.TempDir()
	mk := func(name string, remotes ...string) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q")
		for i := 0; i+1 < len(remotes); i += 2 {
			git(t, dir, "remote", "add", remotes[i], remotes[i+1])
		}
		return dir
	}
	sessions := map[string]string{}
	f.svc.opts.SessionDir = func(_ context.Context, id string) (string, error) {
		if d, ok := sessions[id]; ok {
			return d, nil
		}
		return "", ErrSessionNotFound
	}
	ssh := mk("ssh", "origin", "git@"+hostname+":group/repo.git")
	sessions["s1"] = ssh
	tests := []struct {
		name     string
		project  *pb.GitLabProject
		wantCode codes.Code
		wantBC   string
	}{
		{name: "ssh origin", project: &pb.GitLabProject{WorkingDirectory: ssh}},
		{name: "https with credentials, other remote name", project: &pb.GitLabProject{WorkingDirectory: mk("https", "upstream", "https://oauth2:"+testToken+"@"+host+"/group/repo.git")}},
		{name: "origin elsewhere, second remote here", project: &pb.GitLabProject{WorkingDirectory: mk("two", "origin", "git@github.com:me/repo.git", "gl", "ssh://git@"+hostname+":2222/group/repo")}},
		{name: "session", project: &pb.GitLabProject{SessionId: "s1"}},
		{name: "unknown session", project: &pb.GitLabProject{SessionId: "nope"}, wantCode: codes.NotFound, wantBC: server.CodeSessionNotFound},
		{name: "remote not on this GitLab", project: &pb.GitLabProject{WorkingDirectory: mk("github", "origin", "git@github.com:me/repo.git")}, wantCode: codes.FailedPrecondition, wantBC: CodeNoProject},
		{name: "no remote", project: &pb.GitLabProject{WorkingDirectory: mk("none")}, wantCode: codes.FailedPrecondition, wantBC: CodeNoProject},
		{name: "not a repository", project: &pb.GitLabProject{WorkingDirectory: t.TempDir()}, wantCode: codes.FailedPrecondition, wantBC: CodeNoProject},
		{name: "no directory", project: &pb.GitLabProject{WorkingDirectory: filepath.Join(root, "missing")}, wantCode: codes.NotFound, wantBC: server.CodeDirectoryNotFound},
		{name: "nothing named", project: &pb.GitLabProject{}, wantCode: codes.InvalidArgument, wantBC: server.CodeInvalidArgument},
		{name: "bad project path", project: &pb.GitLabProject{Project: "../x"}, wantCode: codes.InvalidArgument, wantBC: server.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.svc.ListPipelines(t.Context(), &pb.ListPipelinesRequest{Project: tc.project})
			if tc.wantCode != codes.OK {
				wantStatus(t, err, tc.wantCode, tc.wantBC)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Pipelines) != 3 || resp.Pipelines[0].Project != "group/repo" {
				t.Fatalf("pipelines = %v", resp.Pipelines)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 1, func(o *Options) { o.Token, o.TokenFile = "", path })
	if _, err := f.svc.ListIssues(t.Context(), &pb.ListIssuesRequest{Project: repo}); err != nil {
		t.Fatal(err)
	}
	if err := (Config{Token: "a", TokenFile: path}).Validate(); err == nil {
		t.Fatal("token and token file both accepted")
	}
	if err := (Config{URL: "https://user:" + testToken + "@gitlab.com"}).Validate(); err == nil || strings.Contains(err.Error(), testToken) {
		t.Fatalf("URL with credentials: %v", err)
	}
}
