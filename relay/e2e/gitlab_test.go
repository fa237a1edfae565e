package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/claudecli"
	"github.com/betcode-dev/betcode/shared/fakegitlab"
)

const relayGitLabToken = "glpat-relay-e2e-SECRET-9876"

// TestGitLabThroughTheRelay: GitLabService of a machine is reached through
// the relay with the relay's authorization, as every agent service is:
// the owner's token gets the project of a checkout on the machine (a log
// larger than one message in chunks, `betcode gitlab` included), another
// user gets NOT_FOUND for the machine, no token UNAUTHENTICATED; a token
// GitLab refuses is PERMISSION_DENIED (not the relay's UNAUTHENTICATED);
// neither the relay nor the agent logs the GitLab token.
func TestGitLabThroughTheRelay(t *testing.T) {
	w := newWorld(t, "")
	fake, err := fakegitlab.Start(fakegitlab.Config{Token: relayGitLabToken, Projects: []*fakegitlab.Project{fakegitlab.SampleProject(5, "team/app", 30, 70000)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })

	cert, key := w.machineCert("gl1")
	a := w.newAgent("gl1")
	env := append([]string{"HOME=" + a.home, "BETCODE_GITLAB_TOKEN=" + relayGitLabToken}, claudecli.Env(a.home, w.api.URL())...)
	a.proc = start(t, "agent gl1", env, bin(t, "betcode-agent"), "serve", "--listen", "unix://"+a.sock,
		"--data-dir", a.data, "--claude-bin", claudecli.Require(t), "--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile),
		"--machine-cert", cert, "--machine-key", key, "--machine-name", "name-gl1", "--log-level", "debug", "--drain-timeout", "0",
		"--gitlab-url", fake.URL(), "--http-listen", "", "--relay-e2e", "optional")
	a.proc.waitLine(t, `relay link up`, 60*time.Second)
	if out, err := exec.Command("git", "-C", a.project, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if out, err := exec.Command("git", "-C", a.project, "remote", "add", "origin", "ssh://git@127.0.0.1:2222/team/app.git").CombinedOutput(); err != nil {
		t.Fatalf("git remote: %v\n%s", err, out)
	}
	ctx := onMachine(ctxT(t, 60*time.Second), "gl1")
	project := &pb.GitLabProject{WorkingDirectory: a.project}

	t.Run("owner", func(t *testing.T) {
		gl := pb.NewGitLabServiceClient(w.client())
		pls, err := gl.ListPipelines(ctx, &pb.ListPipelinesRequest{Project: project, Limit: 25, Offset: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(pls.Pipelines) != 25 || pls.Total != 30 || pls.Pipelines[0].Id != 27 || pls.Pipelines[0].Project != "team/app" {
			t.Fatalf("pipelines: %d of %d, first %v", len(pls.Pipelines), pls.Total, pls.Pipelines[0])
		}
		log := fakegitlab.SampleLog(70000)
		var got strings.Builder
		req := &pb.GetJobLogRequest{Project: project, JobId: 4003}
		chunks := 0
		for {
			resp, err := gl.GetJobLog(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			chunks++
			got.WriteString(resp.Content)
			if req.Offset = resp.NextOffset; resp.NextOffset >= resp.TotalBytes {
				break
			}
		}
		if got.String() != log || chunks < 2 {
			t.Fatalf("log: %d bytes in %d chunks, want %d bytes", got.Len(), chunks, len(log))
		}
	})
	t.Run("betcode gitlab through the relay", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, bin(t, "betcode"), "--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile), "--machine", "gl1",
			"gitlab", "--dir", a.project, "mr", "4")
		cmd.Env = append(cleanEnv(), "XDG_CONFIG_HOME="+t.TempDir(), "BETCODE_TOKEN="+w.userToken("alice"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "!4 test4") || !strings.Contains(string(out), "feature-4 -> main") {
			t.Fatalf("betcode gitlab mr: %v\n%s", err, out)
		}
		fake.FailNext(fakegitlab.Failure{Status: 401})
		cmd = exec.CommandContext(ctx, bin(t, "betcode"), "--relay", w.addr, "--relay-ca", filepath.Join(w.pki, pki.CACertFile), "--machine", "gl1",
			"gitlab", "--dir", a.project, "issues")
		cmd.Env = append(cleanEnv(), "XDG_CONFIG_HOME="+t.TempDir(), "BETCODE_TOKEN="+w.userToken("alice"))
		out, err = cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(string(out), "refused the token") || strings.Contains(string(out), "betcode login") {
			t.Fatalf("GitLab refusing its token: %v\n%s", err, out)
		}
	})
	t.Run("another user", func(t *testing.T) {
		_, err := pb.NewGitLabServiceClient(w.dial(w.addr, w.userToken("bob"))).ListIssues(ctx, &pb.ListIssuesRequest{Project: project})
		wantCode(t, "bob ListIssues", err, codes.NotFound, `no machine "gl1"`)
	})
	t.Run("no token", func(t *testing.T) {
		_, err := pb.NewGitLabServiceClient(w.dial(w.addr, "")).ListIssues(ctx, &pb.ListIssuesRequest{Project: project})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("no token: %v", err)
		}
	})
	t.Run("token never logged", func(t *testing.T) {
		for _, p := range []*proc{w.relay, a.proc} {
			if strings.Contains(p.Log(), relayGitLabToken) {
				t.Fatalf("%s logged the GitLab token:\n%s", p.name, p.Log())
			}
		}
	})
}
