package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/gitlab"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakegitlab"
)

const gitlabToken = "glpat-e2e-SECRET-token-1234"

// gitlabRepo makes a git repository at dir whose origin is remote.
func gitlabRepo(t *testing.T, dir, remote string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"remote", "add", "origin", remote}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestGitLabThroughTheRealAgent: the agent binary, configured with the
// fake GitLab's URL and a token in its environment, serves GitLabService
// on its socket for the repository of a session the real Claude Code CLI
// ran a turn in; `betcode gitlab` prints from it; the token is masked in
// GetSettings and never in the agent's debug log.
func TestGitLabThroughTheRealAgent(t *testing.T) {
	fake, err := fakegitlab.Start(fakegitlab.Config{Token: gitlabToken, Projects: []*fakegitlab.Project{fakegitlab.SampleProject(42, "team/app", 130, 60000)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL(), Args: []string{"--gitlab-url", fake.URL()},
		Env: []string{"BETCODE_GITLAB_TOKEN=" + gitlabToken}})
	ctx := ctxT(t)
	dir := agent.ProjectDir(t)
	gitlabRepo(t, dir, "git@127.0.0.1:team/app.git")
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorkingDirectory: dir})
	say(t, s, "hello")
	id := sessionID(t, until(t, s, isTurnComplete))
	gl := pb.NewGitLabServiceClient(agent.Conn)

	t.Run("merge requests of the session's repository, several pages", func(t *testing.T) {
		resp, err := gl.ListMergeRequests(ctx, &pb.ListMrsRequest{Project: &pb.GitLabProject{SessionId: id}, Limit: 120, Offset: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.MergeRequests) != 120 || resp.Total != 130 || resp.MergeRequests[0].Iid != 125 || resp.MergeRequests[119].Iid != 6 {
			t.Fatalf("%d MRs of %d, first !%d", len(resp.MergeRequests), resp.Total, resp.MergeRequests[0].GetIid())
		}
	})
	t.Run("a job log larger than one message", func(t *testing.T) {
		log := fakegitlab.SampleLog(60000)
		var got strings.Builder
		req := &pb.GetJobLogRequest{Project: &pb.GitLabProject{WorkingDirectory: dir}, JobId: 7003}
		chunks := 0
		for {
			resp, err := gl.GetJobLog(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			chunks++
			got.WriteString(resp.Content)
			req.Offset = resp.NextOffset
			if resp.NextOffset >= resp.TotalBytes {
				if !resp.Complete {
					t.Fatal("the failed job's log is not complete")
				}
				break
			}
		}
		if got.String() != log || chunks < 2 || len(log) <= gitlab.DefaultLogChunk {
			t.Fatalf("%d bytes in %d chunks, want the %d-byte log", got.Len(), chunks, len(log))
		}
	})
	t.Run("betcode gitlab", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, testenv.Binaries(t).Client, "--agent", "unix://"+agent.Opts.Socket, "gitlab", "--session", id, "jobs", "3")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "3003 test test-job failed") {
			t.Fatalf("betcode gitlab jobs: %v\n%s", err, out)
		}
		cmd = exec.CommandContext(ctx, testenv.Binaries(t).Client, "--agent", "unix://"+agent.Opts.Socket, "gitlab", "issues", "--limit", "2")
		cmd.Dir = dir // the project of this directory
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
		if out, err = cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "#130") || !strings.Contains(string(out), "2 of 87 issues") {
			t.Fatalf("betcode gitlab issues: %v\n%s", err, out)
		}
	})
	t.Run("errors", func(t *testing.T) {
		other := agent.ProjectDir(t)
		gitlabRepo(t, other, "https://github.com/team/app.git")
		_, err := gl.ListIssues(ctx, &pb.ListIssuesRequest{Project: &pb.GitLabProject{WorkingDirectory: other}})
		if status.Code(err) != codes.FailedPrecondition || server.BetCodeCode(err) != gitlab.CodeNoProject || !strings.Contains(err.Error(), "github.com") {
			t.Fatalf("remote elsewhere: %v", err)
		}
		fake.FailNext(fakegitlab.Failure{Status: 401})
		_, err = gl.ListIssues(ctx, &pb.ListIssuesRequest{Project: &pb.GitLabProject{SessionId: id}})
		if status.Code(err) != codes.PermissionDenied || server.BetCodeCode(err) != gitlab.CodeAuthFailed {
			t.Fatalf("401: %v", err)
		}
	})
	t.Run("token masked and never logged", func(t *testing.T) {
		st, err := pb.NewConfigServiceClient(agent.Conn).GetSettings(ctx, &pb.GetSettingsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range st.Values {
			if v.Key == "gitlab-token" && v.Value.GetStringValue() != "********" {
				t.Fatalf("gitlab-token shown as %v", v.Value)
			}
		}
		if strings.Contains(st.String(), gitlabToken) {
			t.Fatal("GetSettings shows the token")
		}
		for _, r := range fake.Requests() {
			if r.Token != gitlabToken && r.Status != 401 {
				t.Fatalf("request %s %s sent token %q", r.Method, r.Path, r.Token)
			}
		}
		if strings.Contains(agent.Log(), gitlabToken) {
			t.Fatalf("the agent logged the token:\n%s", agent.Log())
		}
		if !strings.Contains(agent.Log(), "gitlab: call failed") {
			t.Fatalf("the 401 was not logged:\n%s", agent.Log())
		}
	})
}
