package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The `betcode orchestration` commands run plans of subagent steps with
// dependencies through SubagentService (docs/subagents.md): create one from
// a plan file, list, watch and cancel them.

func newOrchestrationCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "orchestration",
		Aliases: []string{"orch"},
		Short:   "Orchestrations: a plan of subagent steps with dependencies; create, list, watch, cancel (ALPHA)",
		Long: `Run a plan of steps, each a subagent, where a step starts once the steps it
depends on completed, at most --max-parallel at once. The plan is a YAML or JSON
file (docs/subagents.md, "CLI"). The service is ALPHA: the agent serves it only
with --feature-flag subagent_orchestration. Every command takes --json.`,
	}
	cmd.AddCommand(newOrchestrationCreateCmd(g), newOrchestrationListCmd(g), newOrchestrationWatchCmd(g), newOrchestrationCancelCmd(g))
	return cmd
}

// loadPlan reads the plan file ("-": standard input) and builds the
// request; a relative step cwd is relative to the plan file's directory.
func loadPlan(cmd *cobra.Command, g *globals, file, parent string) (*pb.CreateOrchestrationRequest, error) {
	var r io.Reader = cmd.InOrStdin()
	name, base := "<stdin>", ""
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usageError("plan: %w", err)
		}
		defer f.Close()
		r, name, base = f, file, filepath.Dir(file)
	}
	p, err := parsePlan(name, r)
	if err != nil {
		if errors.Is(err, errPlan) {
			return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
		}
		return nil, err
	}
	_, viaRelay, err := g.relay()
	if err != nil {
		return nil, err
	}
	req, err := p.request(parent, func(dir string) (string, error) {
		if filepath.IsAbs(dir) {
			return filepath.Clean(dir), nil
		}
		if viaRelay {
			return "", errors.New("through a relay, give an absolute path on the machine")
		}
		if base == "" {
			return projectDir(g, dir)
		}
		return filepath.Abs(filepath.Join(base, dir))
	})
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
	}
	return req, nil
}

func newOrchestrationCreateCmd(g *globals) *cobra.Command {
	var parent, file, name string
	var maxParallel uint32
	var failFast, cont, watch, asJSON bool
	cmd := &cobra.Command{
		Use:   "create --parent SESSION -f PLAN [--max-parallel N] [--fail-fast|--continue] [--watch]",
		Short: "Start an orchestration from a plan file (YAML, or JSON); prints it (with --watch, follows it)",
		Long: `Read the plan (YAML, or JSON when the file ends in .json; - reads standard
input), check it (unknown keys, steps without id or prompt, repeated ids,
unknown dependencies and cycles are reported with the file's line) and start it
under the parent session. --max-parallel, --fail-fast and --continue override
the plan's max_parallel and failure_policy; --name its name.

With --watch, show the steps' table until the orchestration ends: the exit code
is 0 when it completed, 1 when it failed or was cancelled.

A plan:

  name: release-prep
  max_parallel: 2
  failure_policy: continue     # or fail-fast (the default)
  steps:
    - id: tests
      prompt: Run the test suite and list the failures.
      allow_tools: [Read, "Bash(go test *)"]
      auto_approve: true
      max_attempts: 2
    - id: changelog
      prompt: Draft the changelog since the last tag.
      model: claude-haiku-4-5
    - id: summary
      prompt: Summarise the release's state for the team.
      depends_on: [tests, changelog]
      include_dependency_results: true`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFlags(cmd, []string{"parent", "file"}, "fail-fast", "continue"); err != nil {
				return err
			}
			req, err := loadPlan(cmd, g, file, parent)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("max-parallel") {
				req.MaxParallel = maxParallel
			}
			if name != "" {
				req.Name = name
			}
			switch {
			case failFast:
				req.FailurePolicy = pb.FailurePolicy_FAILURE_POLICY_FAIL_FAST
			case cont:
				req.FailurePolicy = pb.FailurePolicy_FAILURE_POLICY_CONTINUE
			}
			return subagentCall(cmd, g, "create orchestration", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.CreateOrchestration(ctx, req)
				if err != nil {
					return err
				}
				o := resp.GetOrchestration()
				switch {
				case asJSON:
					if err := printJSON(cmd.OutOrStdout(), o); err != nil {
						return err
					}
				case watch:
					fmt.Fprintf(cmd.ErrOrStderr(), "orchestration %s (%s): %d steps\n", o.GetId(), orDash(o.GetName()), len(o.GetSteps()))
				default:
					fmt.Fprintln(cmd.OutOrStdout(), o.GetId())
					fmt.Fprintf(cmd.ErrOrStderr(), "started orchestration %q with %d steps; follow it with betcode orchestration watch %s\n",
						o.GetName(), len(o.GetSteps()), o.GetId())
				}
				if !watch {
					return nil
				}
				return watchOrchestration(ctx, cmd, c, o.GetId(), asJSON)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&parent, "parent", "", "the parent session (required)")
	f.StringVarP(&file, "file", "f", "", "the plan file, YAML or .json; - for standard input (required)")
	f.StringVar(&name, "name", "", "display name (default: the plan's name)")
	f.Uint32Var(&maxParallel, "max-parallel", 0, "most steps running at once (default: the plan's max_parallel, else the agent's limit)")
	f.BoolVar(&failFast, "fail-fast", false, "when a step fails, cancel every unfinished step (the default)")
	f.BoolVar(&cont, "continue", false, "when a step fails, skip only its dependents and run the rest")
	f.BoolVarP(&watch, "watch", "w", false, "follow the orchestration until it ends")
	f.BoolVar(&asJSON, "json", false, "print the orchestration as one JSON object (with --watch, then each watch event as a JSON line)")
	return cmd
}

func newOrchestrationListCmd(g *globals) *cobra.Command {
	var parent string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--parent SESSION]",
		Short: "List orchestrations, oldest first, with their progress",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return subagentCall(cmd, g, "list orchestrations", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.ListOrchestrations(ctx, &pb.ListOrchestrationsRequest{ParentSessionId: parent})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printOrchestrationList(cmd.OutOrStdout(), resp.GetOrchestrations())
			})
		},
	}
	cmd.Flags().StringVar(&parent, "parent", "", "only orchestrations of this parent session")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

func newOrchestrationWatchCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch ORCHESTRATION_ID",
		Short: "Show the steps' status, attempt and subagent live until the orchestration ends; exit 0 if it completed",
		Long: `Show the orchestration's steps (status, attempt, subagent, dependencies) and
update them as they change, until the orchestration ends. On a terminal the
table is redrawn in place; otherwise each change is one line, and the table
is printed at the end. The exit code is 0 when the orchestration completed, 1
when it failed or was cancelled. Ctrl-C stops watching; the orchestration goes
on. With --json, each watch event is one JSON line.`,
		Args: oneArg("the orchestration id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subagentCall(cmd, g, "watch orchestration", func(ctx context.Context, c pb.SubagentServiceClient) error {
				return watchOrchestration(ctx, cmd, c, args[0], asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each watch event as one JSON line")
	return cmd
}

// watchOrchestration follows WatchOrchestration to its end (or Ctrl-C)
// and fails unless the orchestration completed.
func watchOrchestration(ctx context.Context, cmd *cobra.Command, c pb.SubagentServiceClient, id string, asJSON bool) error {
	ctx, stopped, release := interruptible(ctx)
	defer release()
	s, err := c.WatchOrchestration(ctx, &pb.WatchOrchestrationRequest{OrchestrationId: id})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	f, isFile := out.(*os.File)
	v := &orchestrationView{out: out, json: asJSON, live: isFile && isTerminal(f)}
	if err := follow(stopped, s, v.print); err != nil {
		return err
	}
	if stopped() {
		fmt.Fprintf(cmd.ErrOrStderr(), "stopped watching; the orchestration goes on (betcode orchestration cancel %s stops it)\n", id)
		return nil
	}
	return v.result(id)
}

func newOrchestrationCancelCmd(g *globals) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel ORCHESTRATION_ID [--reason TEXT]",
		Short: "Cancel an orchestration: its running steps are interrupted, the others not started; prints its steps",
		Args:  oneArg("the orchestration id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subagentCall(cmd, g, "cancel orchestration", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.CancelOrchestration(ctx, &pb.CancelOrchestrationRequest{OrchestrationId: args[0], Reason: reason})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp.GetOrchestration())
				}
				return printOrchestration(cmd.OutOrStdout(), resp.GetOrchestration())
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the cancellation)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the orchestration as one JSON object")
	return cmd
}
