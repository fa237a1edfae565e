package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The `betcode session` commands drive SessionService (managed sessions,
// docs/sessions.md), following the CLI of the obey session RPCs
// (shared/spec/obey-session-rpcs.md): obey's --campaign is the project
// directory, --cwd here.

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Managed sessions: create, list, get, send, watch, stop, restart (SessionService)",
		Long: `Manage the agent's sessions through SessionService: create one with a provider
(claude-code, codex, openai-api, acp), send it messages and stream its activity,
watch its status, stop and restart it. Every command takes --json (one JSON
object; one per line for send and watch). Errors show the BETCODE-NNNN code
the agent returned. See docs/sessions.md.`,
	}
	cmd.AddCommand(newSessionCreateCmd(g), newSessionListCmd(g), newSessionGetCmd(g), newSessionSendCmd(g),
		newSessionWatchCmd(g), newSessionStopCmd(g), newSessionRestartCmd(g),
		newSessionShareCmd(g), newSessionUnshareCmd(g), newSessionSharesCmd(g))
	return cmd
}

// sessionCall dials and runs fn with a SessionService client; an error
// from the agent becomes "<what>: BETCODE-NNNN: message" with its exit code.
func sessionCall(cmd *cobra.Command, g *globals, what string, fn func(context.Context, pb.SessionServiceClient) error) error {
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	return rpcError(what, fn(cmd.Context(), pb.NewSessionServiceClient(conn)))
}

// rpcError shows a gRPC status by its message, which starts with the
// BETCODE-NNNN code for SessionService's own errors, and keeps the exit
// code the status maps to. Other errors pass through.
func rpcError(what string, err error) error {
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
	msg := st.Message()
	if !strings.HasPrefix(msg, "BETCODE-") {
		msg = st.Code().String() + ": " + msg
	}
	return &client.ExitError{Code: sessionExitCode(err), Err: fmt.Errorf("%s: %s", what, msg)}
}

// sessionExitCode is client.ExitCode, except that a missing project
// directory is an invalid argument (as for chat), not a missing session,
// and a session in the wrong state (BETCODE-2011, 2020) an agent error.
func sessionExitCode(err error) int {
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return client.ExitAgentError
	case codes.NotFound:
		if strings.HasPrefix(status.Convert(err).Message(), "BETCODE-2001") {
			return client.ExitInvalidArgs
		}
	}
	return client.ExitCode(err)
}

// keyValues parses repeated KEY=VALUE flags.
func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--%s %q: want KEY=VALUE", flag, kv)}
		}
		out[k] = v
	}
	return out, nil
}

// projectDir is dir made absolute, or this directory for an agent on this
// machine; through a relay the directory must be named.
func projectDir(g *globals, dir string) (string, error) {
	if dir == "" {
		if _, viaRelay, err := g.relay(); err != nil {
			return "", err
		} else if viaRelay {
			return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("through a relay, name the project directory on the machine: --cwd PATH")}
		}
		wd, err := os.Getwd()
		if err != nil {
			return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("this directory: %w", err)}
		}
		dir = wd
	}
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--cwd %q: %w", dir, err)}
	}
	return abs, nil
}

// dirFlag registers --cwd with obey's name --campaign as an alias.
func dirFlag(cmd *cobra.Command, dir *string, usage string) {
	cmd.Flags().StringVar(dir, "cwd", "", usage)
	cmd.Flags().StringVar(dir, "campaign", "", "same as --cwd (obey's name for the project)")
	_ = cmd.Flags().MarkHidden("campaign")
}

func newSessionCreateCmd(g *globals) *cobra.Command {
	var o struct {
		dir, prov, model, name, task, message string
		config, env                           []string
		maxTokens                             int64
		timeout                               time.Duration
		asJSON                                bool
	}
	cmd := &cobra.Command{
		Use:   "create [--cwd DIR] [--provider NAME] [--model M] [--name NAME]",
		Short: "Create a session and start its provider; prints the session (RUNNING)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kind, err := provider.Parse(o.prov)
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--provider: %w", err)}
			}
			config, err := keyValues("provider-config", o.config)
			if err != nil {
				return err
			}
			env, err := keyValues("env", o.env)
			if err != nil {
				return err
			}
			dir, err := projectDir(g, o.dir)
			if err != nil {
				return err
			}
			req := &pb.CreateSessionRequest{
				WorkingDirectory: dir, Provider: kind, Model: o.model, AgentName: o.name, TaskId: o.task,
				ProviderConfig: config, Environment: env, MaxTokens: o.maxTokens, InitialMessage: o.message,
			}
			if o.timeout != 0 {
				req.Timeout = durationpb.New(o.timeout)
			}
			return sessionCall(cmd, g, "create session", func(ctx context.Context, c pb.SessionServiceClient) error {
				resp, err := c.CreateSession(ctx, req)
				if err != nil {
					return err
				}
				return printSession(cmd.OutOrStdout(), resp.GetSession(), o.asJSON)
			})
		},
	}
	f := cmd.Flags()
	dirFlag(cmd, &o.dir, "project directory the session runs in (default: the current directory)")
	f.StringVar(&o.prov, "provider", "claude-code", "provider: claude-code, codex, openai-api or acp")
	f.StringVar(&o.model, "model", "", "model (default: the provider's)")
	f.StringVar(&o.name, "name", "", "agent name (default: PROVIDER-SHORTID)")
	f.StringVar(&o.task, "task", "", "task id label")
	f.StringArrayVar(&o.config, "provider-config", nil, "provider configuration KEY=VALUE, repeatable (acp: agent=NAME)")
	f.StringArrayVar(&o.env, "env", nil, "environment variable KEY=VALUE for the provider, repeatable")
	f.Int64Var(&o.maxTokens, "max-tokens", 0, "token budget (0: unlimited)")
	f.DurationVar(&o.timeout, "timeout", 0, "session timeout since creation (0: none)")
	f.StringVarP(&o.message, "message", "m", "", "initial message, sent as soon as the session starts")
	f.BoolVar(&o.asJSON, "json", false, "print the session as one JSON object")
	return cmd
}

func newSessionListCmd(g *globals) *cobra.Command {
	var dir, prov string
	var statuses []string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--cwd DIR] [--all]",
		Short: "List active sessions (CREATED, STARTING, RUNNING, WORKING); --all adds STOPPED and FAILED",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &pb.SessionServiceListSessionsRequest{IncludeTerminated: all}
			if dir != "" {
				abs, err := projectDir(g, dir)
				if err != nil {
					return err
				}
				req.WorkingDirectory = abs
			}
			if prov != "" {
				kind, err := provider.Parse(prov)
				if err != nil {
					return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--provider: %w", err)}
				}
				req.Provider = kind
			}
			for _, s := range statuses {
				st, err := parseStatus(s)
				if err != nil {
					return err
				}
				req.Statuses = append(req.Statuses, st)
			}
			return sessionCall(cmd, g, "list sessions", func(ctx context.Context, c pb.SessionServiceClient) error {
				resp, err := c.ListSessions(ctx, req)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printSessionTable(cmd.OutOrStdout(), resp.GetSessions())
			})
		},
	}
	f := cmd.Flags()
	dirFlag(cmd, &dir, "only sessions of this project directory")
	f.BoolVar(&all, "all", false, "include STOPPED and FAILED sessions")
	f.StringVar(&prov, "provider", "", "only sessions of this provider")
	f.StringSliceVar(&statuses, "status", nil, "only these statuses (created, starting, running, working, stopping, stopped, failed)")
	f.BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

func parseStatus(s string) (pb.SessionStatus, error) {
	v, ok := pb.SessionStatus_value["SESSION_STATUS_"+strings.ToUpper(strings.TrimPrefix(strings.ToLower(s), "session_status_"))]
	if !ok || v == 0 {
		return 0, &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--status %q: want created, starting, running, working, stopping, stopped or failed", s)}
	}
	return pb.SessionStatus(v), nil
}

func newSessionGetCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "get SESSION_ID",
		Aliases: []string{"info"},
		Short:   "Show a session: status, provider, model, tokens, process, times",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionCall(cmd, g, "get session", func(ctx context.Context, c pb.SessionServiceClient) error {
				ms, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: args[0]})
				if err != nil {
					return err
				}
				return printSession(cmd.OutOrStdout(), ms, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as one JSON object")
	return cmd
}

// interruptible is ctx, also cancelled by Ctrl-C; stopped reports whether
// Ctrl-C came.
func interruptible(ctx context.Context) (_ context.Context, stopped func() bool, release func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	got := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sigs:
			close(got)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() bool {
			select {
			case <-got:
				return true
			default:
				return false
			}
		}, func() {
			signal.Stop(sigs)
			cancel()
			<-done
		}
}

// follow receives a stream until it ends, calling fn for each message; the
// end by Ctrl-C is no error.
func follow[T any](stopped func() bool, s grpc.ServerStreamingClient[T], fn func(*T) error) error {
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if stopped() {
				return nil
			}
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

func newSessionSendCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "send SESSION_ID MESSAGE...",
		Short: "Send a message to a RUNNING session and stream its activity until it is idle again",
		Long: `Send a message to a RUNNING session and print its activity as it comes:
thinking, tool calls and results, permission requests, errors, and last the
completion (the turn's text; its token usage on stderr). With --json, each
SessionActivityEvent is one JSON line. Ctrl-C stops following; the turn goes
on (stop it with betcode session stop --force).`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionCall(cmd, g, "send message", func(ctx context.Context, c pb.SessionServiceClient) error {
				ctx, stopped, release := interruptible(ctx)
				defer release()
				s, err := c.SendMessage(ctx, &pb.SendMessageRequest{SessionId: args[0], Message: strings.Join(args[1:], " ")})
				if err != nil {
					return err
				}
				p := &activityPrinter{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), json: asJSON}
				err = follow(stopped, s, p.print)
				if stopped() {
					fmt.Fprintf(cmd.ErrOrStderr(), "stopped following; the turn goes on (betcode session stop --force %s interrupts it)\n", args[0])
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each activity event as one JSON line")
	return cmd
}

func newSessionWatchCmd(g *globals) *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch [SESSION_ID]",
		Short: "Stream a session's status changes until it stops (or Ctrl-C); without an id, every session's",
		Long: `Print the session's current status, then each transition (RUNNING -> WORKING,
... -> STOPPED) as it happens, until the session is STOPPED or FAILED or you
press Ctrl-C. Without SESSION_ID, watch every active session (--cwd: of one
project) until Ctrl-C. With --json, each SessionStatusEvent is one JSON line.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionCall(cmd, g, "watch", func(ctx context.Context, c pb.SessionServiceClient) error {
				ctx, stopped, release := interruptible(ctx)
				defer release()
				var s grpc.ServerStreamingClient[pb.SessionStatusEvent]
				var err error
				if len(args) == 1 {
					s, err = c.WatchSession(ctx, &pb.WatchSessionRequest{SessionId: args[0]})
				} else {
					var abs string
					if dir != "" {
						if abs, err = projectDir(g, dir); err != nil {
							return err
						}
					}
					s, err = c.WatchAllSessions(ctx, &pb.WatchAllSessionsRequest{WorkingDirectory: abs})
				}
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				return follow(stopped, s, func(ev *pb.SessionStatusEvent) error {
					return printStatusEvent(out, ev, asJSON)
				})
			})
		},
	}
	dirFlag(cmd, &dir, "without SESSION_ID: only sessions of this project directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each status event as one JSON line")
	return cmd
}

func newSessionStopCmd(g *globals) *cobra.Command {
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "stop SESSION_ID [--force]",
		Short: "Stop a session after its current turn (--force: interrupt it now); prints the session (STOPPED)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionCall(cmd, g, "stop session", func(ctx context.Context, c pb.SessionServiceClient) error {
				resp, err := c.StopSession(ctx, &pb.StopSessionRequest{SessionId: args[0], Graceful: !force})
				if err != nil {
					return err
				}
				return printSession(cmd.OutOrStdout(), resp.GetSession(), asJSON)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "interrupt the running turn instead of waiting for it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as one JSON object")
	return cmd
}

func newSessionRestartCmd(g *globals) *cobra.Command {
	var config []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "restart SESSION_ID [--provider-config KEY=VALUE]...",
		Short: "Stop a session and create a new one with the same configuration; prints the new session",
		Long: `Stop the session (unless it is stopped already) and create a new one with the
same configuration: provider, model, name, task, budget, timeout, environment
and provider configuration, which --provider-config replaces as a whole when
given. The new session has a new id and restart_count one more.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := keyValues("provider-config", config)
			if err != nil {
				return err
			}
			return sessionCall(cmd, g, "restart session", func(ctx context.Context, c pb.SessionServiceClient) error {
				resp, err := c.RestartSession(ctx, &pb.RestartSessionRequest{SessionId: args[0], ProviderConfig: cfg})
				if err != nil {
					return err
				}
				return printSession(cmd.OutOrStdout(), resp.GetSession(), asJSON)
			})
		},
	}
	cmd.Flags().StringArrayVar(&config, "provider-config", nil, "new provider configuration KEY=VALUE, repeatable (replaces the old one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the new session as one JSON object")
	return cmd
}
