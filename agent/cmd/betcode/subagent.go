package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The `betcode subagent` commands drive SubagentService (docs/subagents.md):
// spawn a subagent under a parent session, list, watch and cancel them. The
// service is ALPHA, behind the agent's subagent_orchestration feature flag.

// flagOffHint says how to turn SubagentService on; printed under the
// agent's UNIMPLEMENTED refusal.
const flagOffHint = "SubagentService is ALPHA and off by default: restart the agent with " +
	"`betcode-agent serve --feature-flag subagent_orchestration` (or BETCODE_FEATURE_FLAG=subagent_orchestration, " +
	"or feature-flag in its config file); see docs/subagents.md"

func newSubagentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subagent",
		Short: "Subagents: sessions spawned for a parent session; spawn, list, watch, cancel (ALPHA)",
		Long: `Spawn subagents (separate sessions working for a parent session), list them,
stream one's status changes and text, and cancel them, through SubagentService.
The service is ALPHA: the agent serves it only with --feature-flag
subagent_orchestration (docs/subagents.md). Every command takes --json.`,
	}
	cmd.AddCommand(newSubagentSpawnCmd(g), newSubagentListCmd(g), newSubagentWatchCmd(g), newSubagentCancelCmd(g))
	return cmd
}

// call dials and runs fn on the connection; an error from the agent
// becomes "<what>: CODE: message" (serviceError).
func call(cmd *cobra.Command, g *globals, what string, fn func(context.Context, *grpc.ClientConn) error) error {
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	return serviceError(what, fn(cmd.Context(), conn))
}

// subagentCall is call with a SubagentService client.
func subagentCall(cmd *cobra.Command, g *globals, what string, fn func(context.Context, pb.SubagentServiceClient) error) error {
	return call(cmd, g, what, func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, pb.NewSubagentServiceClient(conn))
	})
}

// serviceError shows a gRPC status as "<what>: CODE: message", CODE being
// the BetCode code of its ErrorInfo (else the gRPC code), and keeps the
// exit code it maps to. The flag-off refusal gets the hint to turn the
// flag on; an agent without the service says so. UNAUTHENTICATED stays a
// status, so that the relay login hint (withHints) still applies. Other
// errors pass through.
func serviceError(what string, err error) error {
	if err == nil {
		return nil
	}
	var ee *client.ExitError
	if errors.As(err, &ee) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.Code() == codes.Unauthenticated {
		return fmt.Errorf("%s: %w", what, err)
	}
	code := client.BetCodeCode(err)
	msg := st.Message()
	switch {
	case code != "":
		msg = code + ": " + msg
	case !strings.HasPrefix(msg, "BETCODE-"):
		msg = st.Code().String() + ": " + msg
	}
	exit := client.ExitCode(err)
	switch st.Code() {
	case codes.Unimplemented:
		exit = client.ExitAgentError
		if code == "NOT_IMPLEMENTED" {
			msg += "\nhint: " + flagOffHint
		} else {
			msg += "\nhint: this agent does not serve it; update betcode-agent to this betcode's version (" + version + ")"
		}
	case codes.FailedPrecondition:
		exit = client.ExitAgentError
	case codes.AlreadyExists:
		exit = client.ExitInvalidArgs
	}
	return &client.ExitError{Code: exit, Err: fmt.Errorf("%s: %s", what, msg)}
}

// usageError is an invalid-arguments error (exit 5).
func usageError(format string, args ...any) error {
	return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf(format, args...)}
}

// oneArg wants exactly one argument, named name in the usage error.
func oneArg(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("%s: want one argument, %s (got %d)", cmd.CommandPath(), name, len(args))
		}
		return nil
	}
}

// noArgs wants no argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments (got %q); see --help", cmd.CommandPath(), args)
	}
	return nil
}

// checkFlags fails with a usage error when a flag of required is not set,
// or more than one of exclusive is. (cobra's own checks end with exit 7;
// a usage error is exit 5.)
func checkFlags(cmd *cobra.Command, required []string, exclusive ...string) error {
	for _, name := range required {
		if !cmd.Flags().Changed(name) {
			return usageError("%s needs --%s; see --help", cmd.CommandPath(), name)
		}
	}
	var set []string
	for _, name := range exclusive {
		if cmd.Flags().Changed(name) {
			set = append(set, "--"+name)
		}
	}
	if len(set) > 1 {
		return usageError("%s: give only one of %s", cmd.CommandPath(), strings.Join(set, ", "))
	}
	return nil
}

// subagentStatusNames are the --status values, in lifecycle order.
var subagentStatusNames = []string{"pending", "running", "waiting_for_user", "completed", "failed", "cancelled", "skipped"}

// parseSubagentStatus parses "running", "RUNNING" or
// "SUBAGENT_STATUS_RUNNING"; "waiting" is WAITING_FOR_USER.
func parseSubagentStatus(s string) (pb.SubagentStatus, error) {
	t := strings.ToUpper(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "subagent_status_"))
	t = strings.ReplaceAll(t, "-", "_")
	if t == "WAITING" {
		t = "WAITING_FOR_USER"
	}
	v, ok := pb.SubagentStatus_value["SUBAGENT_STATUS_"+t]
	if !ok || v == 0 {
		return 0, usageError("--status %q: want one of %s", s, strings.Join(subagentStatusNames, ", "))
	}
	return pb.SubagentStatus(v), nil
}

// subagentStatusText is "RUNNING" for SUBAGENT_STATUS_RUNNING, "-" unset.
func subagentStatusText(st pb.SubagentStatus) string {
	if st == pb.SubagentStatus_SUBAGENT_STATUS_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(st.String(), "SUBAGENT_STATUS_")
}

// terminalSubagent reports whether st is a final status.
func terminalSubagent(st pb.SubagentStatus) bool {
	switch st {
	case pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED, pb.SubagentStatus_SUBAGENT_STATUS_FAILED,
		pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED, pb.SubagentStatus_SUBAGENT_STATUS_SKIPPED:
		return true
	}
	return false
}

// spawnOptions are the flags of `subagent spawn`.
type spawnOptions struct {
	parent, prompt, name, model, dir, worktree, spec, prov string
	createWorktree, autoApprove, watch, asJSON             bool
	tools, config, meta                                    []string
	maxTurns                                               uint32
}

// request builds the SpawnSubagentRequest, checking what the agent would
// refuse anyway so that the user gets a usage error (exit 5) at once.
func (o *spawnOptions) request(g *globals) (*pb.SpawnSubagentRequest, error) {
	if strings.TrimSpace(o.prompt) == "" {
		return nil, usageError("--prompt is empty: say what the subagent should do")
	}
	if o.autoApprove && len(o.tools) == 0 {
		return nil, usageError("--auto-approve needs --allow-tool: it approves those tools and denies every other")
	}
	kind, err := provider.Parse(o.prov)
	if err != nil {
		return nil, usageError("--provider: %w", err)
	}
	config, err := keyValues("provider-config", o.config)
	if err != nil {
		return nil, err
	}
	if len(config) > 0 && kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		return nil, usageError("--provider-config needs --provider (without it the subagent runs the parent's provider and configuration)")
	}
	meta, err := keyValues("metadata", o.meta)
	if err != nil {
		return nil, err
	}
	spec := &pb.SubagentSpec{
		Name: o.name, Prompt: o.prompt, Model: o.model, WorktreeId: o.worktree, CreateWorktree: o.createWorktree,
		AllowedTools: o.tools, AutoApprove: o.autoApprove, MaxTurns: o.maxTurns, Metadata: meta,
		TeammateSpecId: o.spec, Provider: kind, ProviderConfig: config,
	}
	if o.dir != "" {
		if spec.WorkingDirectory, err = projectDir(g, o.dir); err != nil {
			return nil, err
		}
	}
	return &pb.SpawnSubagentRequest{ParentSessionId: o.parent, Spec: spec}, nil
}

func newSubagentSpawnCmd(g *globals) *cobra.Command {
	var o spawnOptions
	cmd := &cobra.Command{
		Use:   "spawn --parent SESSION --prompt TEXT [flags]",
		Short: "Start a subagent for a parent session; prints it (with --watch, follows it to its end)",
		Long: `Start a subagent: a new session working for the parent session on one prompt.
It runs in the parent's directory with the parent's model and provider unless
--cwd, --worktree, --model or --provider say otherwise. --allow-tool lets it use
a tool without asking; with --auto-approve, the allowed tools run and every
other tool is denied instead of asking someone. --teammate-spec gives it a
saved teammate spec (betcode team specs list): its role, instructions, skills
and model come before the prompt.

With --watch, stream the subagent's text and status changes until it ends;
the exit code is 0 when it completed, 1 when it failed or was cancelled.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFlags(cmd, []string{"parent", "prompt"}, "cwd", "worktree", "create-worktree"); err != nil {
				return err
			}
			req, err := o.request(g)
			if err != nil {
				return err
			}
			return subagentCall(cmd, g, "spawn subagent", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.SpawnSubagent(ctx, req)
				if err != nil {
					return err
				}
				sa := resp.GetSubagent()
				if o.asJSON {
					if err := printJSON(cmd.OutOrStdout(), sa); err != nil {
						return err
					}
				} else if o.watch {
					fmt.Fprintf(cmd.ErrOrStderr(), "subagent %s (%s) %s; session %s\n", sa.GetId(), orDash(sa.GetName()),
						subagentStatusText(sa.GetStatus()), sa.GetSessionId())
				} else {
					if err := printSubagent(cmd.OutOrStdout(), sa); err != nil {
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "follow it with betcode subagent watch %s\n", sa.GetId())
				}
				if !o.watch {
					return nil
				}
				return watchSubagent(ctx, cmd, c, sa.GetId(), 0, o.asJSON)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.parent, "parent", "", "the parent session (required)")
	f.StringVarP(&o.prompt, "prompt", "p", "", "what the subagent should do (required)")
	f.StringVar(&o.name, "name", "", "display name, e.g. tests")
	f.StringVar(&o.model, "model", "", "model (default: the parent session's)")
	f.StringVar(&o.dir, "cwd", "", "directory to run in (default: the parent session's)")
	f.StringVar(&o.worktree, "worktree", "", "run in this existing worktree (betcode worktree list)")
	f.BoolVar(&o.createWorktree, "create-worktree", false, "run in a new worktree of its own")
	f.StringArrayVar(&o.tools, "allow-tool", nil, "tool it may use without asking, e.g. Read or 'Bash(go test *)' (repeatable)")
	f.BoolVar(&o.autoApprove, "auto-approve", false, "approve the --allow-tool tools and deny every other instead of asking")
	f.Uint32Var(&o.maxTurns, "max-turns", 0, "maximum agent turns (0: the agent's default)")
	f.StringVar(&o.prov, "provider", "", "provider: claude-code, codex, openai-api or acp (default: the parent's)")
	f.StringArrayVar(&o.config, "provider-config", nil, "with --provider: its configuration KEY=VALUE (repeatable)")
	f.StringVar(&o.spec, "teammate-spec", "", "teammate spec id to use (betcode team specs list)")
	f.StringArrayVar(&o.meta, "metadata", nil, "metadata KEY=VALUE stored with its session (repeatable)")
	f.BoolVarP(&o.watch, "watch", "w", false, "follow the subagent until it ends")
	f.BoolVar(&o.asJSON, "json", false, "print the subagent as one JSON object (with --watch, then each watch event as a JSON line)")
	return cmd
}

func newSubagentListCmd(g *globals) *cobra.Command {
	var parent, orch string
	var statuses []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--parent SESSION] [--orchestration ID] [--status S]",
		Short: "List subagents, oldest first: status, step, tokens, cost and the result's first line",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &pb.ListSubagentsRequest{ParentSessionId: parent, OrchestrationId: orch}
			for _, s := range statuses {
				st, err := parseSubagentStatus(s)
				if err != nil {
					return err
				}
				req.Statuses = append(req.Statuses, st)
			}
			return subagentCall(cmd, g, "list subagents", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.ListSubagents(ctx, req)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printSubagentTable(cmd.OutOrStdout(), resp.GetSubagents(), time.Now())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&parent, "parent", "", "only subagents of this parent session")
	f.StringVar(&orch, "orchestration", "", "only the subagents of this orchestration's steps")
	f.StringSliceVar(&statuses, "status", nil, "only these statuses ("+strings.Join(subagentStatusNames, ", ")+")")
	f.BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

func newSubagentWatchCmd(g *globals) *cobra.Command {
	var from uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch SUBAGENT_ID [--from-sequence N]",
		Short: "Stream a subagent's text and status changes until it ends; exit 0 if it completed",
		Long: `Print the subagent's session as betcode chat does (text as it streams, tool
calls, permission requests, usage) and its status changes (on stderr), from
the start of its session or after --from-sequence, until it ends. The exit code
is 0 when it completed, 1 when it failed, was cancelled or skipped. Ctrl-C
stops watching; the subagent goes on. With --json, each watch event is one
JSON line.`,
		Args: oneArg("the subagent id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subagentCall(cmd, g, "watch subagent", func(ctx context.Context, c pb.SubagentServiceClient) error {
				return watchSubagent(ctx, cmd, c, args[0], from, asJSON)
			})
		},
	}
	cmd.Flags().Uint64Var(&from, "from-sequence", 0, "replay only the session events after this sequence")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each watch event as one JSON line")
	return cmd
}

// watchSubagent follows WatchSubagent to its end (or Ctrl-C) and fails
// unless the subagent completed.
func watchSubagent(ctx context.Context, cmd *cobra.Command, c pb.SubagentServiceClient, id string, from uint64, asJSON bool) error {
	ctx, stopped, release := interruptible(ctx)
	defer release()
	s, err := c.WatchSubagent(ctx, &pb.WatchSubagentRequest{SubagentId: id, FromSequence: from})
	if err != nil {
		return err
	}
	w := newSubagentWatcher(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON)
	if err := follow(stopped, s, w.print); err != nil {
		return err
	}
	if stopped() {
		fmt.Fprintf(cmd.ErrOrStderr(), "stopped watching; the subagent goes on (betcode subagent cancel %s stops it)\n", id)
		return nil
	}
	return w.result(id)
}

// subagentWatcher prints a WatchSubagent stream: the session's events as
// chat does, status changes on stderr.
type subagentWatcher struct {
	r           *client.Renderer
	out, errOut io.Writer
	json        bool
	last        *pb.SubagentStatusChange
}

func newSubagentWatcher(out, errOut io.Writer, asJSON bool) *subagentWatcher {
	return &subagentWatcher{r: &client.Renderer{Out: out, Err: errOut}, out: out, errOut: errOut, json: asJSON}
}

func (w *subagentWatcher) print(m *pb.WatchSubagentResponse) error {
	if c := m.GetStatusChange(); c != nil {
		w.last = c
	}
	if w.json {
		return printJSON(w.out, m)
	}
	if ev := m.GetAgentEvent(); ev != nil {
		w.r.Event(ev)
		return nil
	}
	if c := m.GetStatusChange(); c != nil {
		w.r.EndLine()
		line := fmt.Sprintf("[%s] %s -> %s", c.GetTimestamp().AsTime().Local().Format(time.TimeOnly),
			subagentStatusText(c.GetPreviousStatus()), subagentStatusText(c.GetStatus()))
		if c.GetMessage() != "" {
			line += ": " + c.GetMessage()
		}
		_, err := fmt.Fprintln(w.errOut, line)
		return err
	}
	return nil
}

// result is nil when the last status seen is COMPLETED, else an agent
// error (exit 1) naming how the subagent ended.
func (w *subagentWatcher) result(id string) error {
	w.r.EndLine()
	st := w.last.GetStatus()
	switch {
	case st == pb.SubagentStatus_SUBAGENT_STATUS_COMPLETED:
		return nil
	case !terminalSubagent(st):
		return &client.ExitError{Code: client.ExitConnection, Err: fmt.Errorf("watch subagent %s: the stream ended while it was %s", id, subagentStatusText(st))}
	}
	msg := fmt.Sprintf("subagent %s ended %s", id, subagentStatusText(st))
	if w.last.GetMessage() != "" {
		msg += ": " + w.last.GetMessage()
	}
	return &client.ExitError{Code: client.ExitAgentError, Err: errors.New(msg)}
}

func newSubagentCancelCmd(g *globals) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel SUBAGENT_ID [--reason TEXT]",
		Short: "Cancel a pending or running subagent (its turn is interrupted); prints it",
		Args:  oneArg("the subagent id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subagentCall(cmd, g, "cancel subagent", func(ctx context.Context, c pb.SubagentServiceClient) error {
				resp, err := c.CancelSubagent(ctx, &pb.CancelSubagentRequest{SubagentId: args[0], Reason: reason})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				sa := resp.GetSubagent()
				if resp.GetWasActive() {
					fmt.Fprintf(cmd.OutOrStdout(), "cancelled subagent %s (%s): now %s\n", args[0], orDash(sa.GetName()), subagentStatusText(sa.GetStatus()))
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "subagent %s (%s) had already ended: %s\n", args[0], orDash(sa.GetName()), subagentStatusText(sa.GetStatus()))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the cancellation)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the response as one JSON object")
	return cmd
}
