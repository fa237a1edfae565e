package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/gitlab"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakegitlab"
)

// serveGitLab serves the real GitLabService, pointed at a fake GitLab, on
// a Unix socket; it returns the --agent address.
func serveGitLab(t *testing.T, fake *fakegitlab.Server, chunk int) string {
	t.Helper()
	svc, err := gitlab.New(gitlab.Options{Config: gitlab.Config{URL: fake.URL(), Token: "tok", LogChunk: chunk}})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bcg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterGitLabServiceServer(srv, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return "unix://" + l.Addr().String()
}

func TestGitLabCommands(t *testing.T) {
	cliEnv(t)
	fake, err := fakegitlab.Start(fakegitlab.Config{Token: "tok", Projects: []*fakegitlab.Project{fakegitlab.SampleProject(7, "group/repo", 30, 3000)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	agent := serveGitLab(t, fake, 8192)
	bigLog := fakegitlab.SampleLog(3000)
	tests := []struct {
		name     string
		args     []string
		fail     []fakegitlab.Failure
		want     []string // in stdout
		wantErr  []string // in stderr or the error
		wantExit int
		exact    string // whole stdout
	}{
		{name: "mrs", args: []string{"mrs", "--state", "all", "--limit", "25"}, want: []string{"!30  closed", "test30", "feature-30 -> main"}, wantErr: []string{"25 of 30 merge requests"}},
		{name: "mrs by author", args: []string{"mrs", "--author", "dev", "--state", "opened"}, want: []string{"!4 ", "dev"}},
		{name: "mr", args: []string{"mr", "!2"}, want: []string{"!2 test2", "Pipeline: running", "feature-2 -> main"}},
		{name: "pipelines", args: []string{"pipelines", "--status", "failed", "--limit", "3"}, want: []string{"29  failed", "main"}, wantErr: []string{"3 of 8 pipelines"}},
		{name: "jobs", args: []string{"jobs", "2"}, want: []string{"2002  build", "2003  test", "failed (allowed)", "script_failure"}},
		{name: "log in chunks", args: []string{"log", "2003"}, exact: bigLog},
		{name: "log tail", args: []string{"log", "2003", "--tail", "2"}, exact: "line 3000: ✓ ok\n\x1b[31;1mERROR: Job failed: exit code 1\x1b[0;m\n"},
		{name: "log tail truncated", args: []string{"log", "2003", "--tail", "2900"}, wantErr: []string{"log truncated: showing the last"}},
		{name: "issues", args: []string{"issues", "--state", "closed", "--label", "bug"}, want: []string{"#30", "closed", "foo,bug"}, wantErr: []string{"10 of 10 issues"}},
		{name: "bad state", args: []string{"mrs", "--state", "nope"}, wantErr: []string{"--state"}, wantExit: client.ExitInvalidArgs},
		{name: "not found", args: []string{"mr", "999"}, wantErr: []string{"GitLab at", "no merge request !999 of group/repo"}, wantExit: client.ExitSessionNotFound},
		{name: "rate limited", args: []string{"issues"}, fail: []fakegitlab.Failure{{Status: 429, RetryAfter: "3600"}}, wantErr: []string{"rate limiting", "retry after 1h0m0s"}, wantExit: client.ExitRateLimited},
		{name: "refused token", args: []string{"issues"}, fail: []fakegitlab.Failure{{Status: 401}}, wantErr: []string{"refused the token"}, wantExit: client.ExitPermission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake.FailNext(tc.fail...)
			out, errOut, err := runCLI(t, "", append([]string{"--agent", agent, "gitlab", "--project", "group/repo"}, tc.args...)...)
			if got := client.ExitCode(err); got != tc.wantExit {
				t.Fatalf("exit %d (%v), want %d\nstderr: %s", got, err, tc.wantExit, errOut)
			}
			if tc.exact != "" && out != tc.exact {
				t.Fatalf("stdout: %d bytes, want %d:\n%.300s", len(out), len(tc.exact), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Fatalf("stdout lacks %q:\n%s", w, out)
				}
			}
			all := errOut
			if err != nil {
				all += err.Error()
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(all, w) {
					t.Fatalf("stderr/error lacks %q:\n%s", w, all)
				}
			}
		})
	}
	t.Run("through a relay the project must be named", func(t *testing.T) {
		_, _, err := runCLI(t, "", "--relay", "127.0.0.1:1", "gitlab", "mrs")
		if client.ExitCode(err) != client.ExitInvalidArgs || !strings.Contains(err.Error(), "--project") {
			t.Fatalf("err = %v", err)
		}
	})
}
