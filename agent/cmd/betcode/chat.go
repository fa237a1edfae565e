package main

import (
	"bufio"
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

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

type chatOpts struct {
	session, model, cwd string
	allow               []string
	from                uint64
}

func newChatCmd(g *globals) *cobra.Command {
	var o chatOpts
	cmd := &cobra.Command{
		Use:   "chat [PROMPT...]",
		Short: "Chat with Claude Code (one prompt from the arguments, or interactively from stdin)",
		Long: `Chat with Claude Code. With a PROMPT, send it, print the answer and exit.
Without one, read prompts line by line from stdin. Text streams as it arrives,
tool calls show on one line each, usage is printed at the end of every turn.
When Claude asks for permission, answer y (allow once), a (allow for the
session) or n (deny). Ctrl-C cancels the running turn; a second Ctrl-C exits.
A dropped connection is resumed from the last event received.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runChat(cmd.Context(), g, o, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.session, "session", "", "attach to an existing session instead of starting one")
	f.StringVar(&o.model, "model", "", "model for a new session")
	f.StringVar(&o.cwd, "cwd", "", "working directory for a new session (default: the current directory)")
	f.StringSliceVar(&o.allow, "allow", nil, "tools Claude may use without asking, e.g. Bash or 'Bash(git *)' (repeatable)")
	f.Uint64Var(&o.from, "from", 0, "with --session: replay events after this sequence first")
	return cmd
}

func runChat(ctx context.Context, g *globals, o chatOpts, prompt string, stdout, stderr io.Writer) error {
	if o.cwd == "" && o.session == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.cwd = wd
	}
	if o.cwd != "" {
		abs, err := filepath.Abs(o.cwd)
		if err != nil {
			return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
		}
		o.cwd = abs
	}
	conn, err := g.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Attaching to a session without --from streams live events only (the
	// agent's default); with --from it replays first.
	start := &pb.StartConversation{SessionId: o.session, WorkingDirectory: o.cwd, Model: o.model, AllowedTools: o.allow}
	if o.session != "" && o.from > 0 {
		start.Metadata = map[string]string{"from_sequence": fmt.Sprint(o.from)}
	}
	conv, err := client.Start(ctx, api, start, o.from)
	if err != nil {
		return err
	}
	defer conv.Close()
	conv.OnReconnect = func(err error, wait time.Duration) {
		fmt.Fprintf(stderr, "\n[connection lost: %v; reconnecting in %s]\n", shortErr(err), wait.Round(time.Millisecond))
	}

	events := make(chan *pb.AgentEvent, 64)
	recvErr := make(chan error, 1)
	go func() {
		for {
			ev, err := conv.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			events <- ev
		}
	}()

	interactive := prompt == "" && isTerminal(os.Stdin)
	lines := make(chan string)
	go func() {
		if prompt != "" {
			return
		}
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		close(lines)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	r := &client.Renderer{Out: stdout, Err: stderr}
	turnActive := false
	var pendingPerm *pb.PermissionRequest
	exit := 0
	send := func(req *pb.AgentRequest) error {
		err := conv.Send(req)
		if errors.Is(err, io.EOF) {
			// The agent ended the stream; Recv reports why.
			return nil
		}
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		return nil
	}
	ask := func() {
		if interactive && !turnActive {
			fmt.Fprint(stderr, "> ")
		}
	}
	if prompt != "" {
		if err := send(userMessage(prompt)); err != nil {
			return err
		}
		turnActive = true
	} else {
		ask()
	}
	inputDone := prompt != ""
	closing := false
	for {
		if inputDone && !turnActive && pendingPerm == nil && !closing {
			closing = true
			_ = conv.CloseSend()
		}
		select {
		case ev := <-events:
			r.Event(ev)
			switch e := ev.Event.(type) {
			case *pb.AgentEvent_PermissionRequest:
				pendingPerm = e.PermissionRequest
				fmt.Fprint(stderr, "  allow? [y]es once / [a]lways this session / [n]o: ")
				if !interactive && prompt != "" {
					// Nobody can answer: deny rather than hang.
					fmt.Fprintln(stderr, "n (no terminal to answer; use --allow to pre-approve)")
					_ = send(permission(pendingPerm.RequestId, pb.PermissionDecision_DENY))
					pendingPerm = nil
				}
			case *pb.AgentEvent_Error:
				if e.Error.IsFatal || turnActive {
					exit = client.CodeForEvent(e.Error.Code)
				}
			case *pb.AgentEvent_TurnComplete:
				turnActive = false
				if e.TurnComplete.StopReason == "cancelled" {
					exit = 0 // the user asked for it
				}
				ask()
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				if exit != 0 {
					return &client.ExitError{Code: exit, Err: errors.New("the turn ended with an error")}
				}
				return nil
			}
			return err
		case line, ok := <-lines:
			if !ok {
				lines = nil
				inputDone = true
				continue
			}
			line = strings.TrimSpace(line)
			if pendingPerm != nil {
				d, ok := parseDecision(line)
				if !ok {
					fmt.Fprint(stderr, "  please answer y, a or n: ")
					continue
				}
				if err := send(permission(pendingPerm.RequestId, d)); err != nil {
					return err
				}
				pendingPerm = nil
				continue
			}
			if line == "" {
				ask()
				continue
			}
			if err := send(userMessage(line)); err != nil {
				return err
			}
			turnActive = true
		case <-sigs:
			if !turnActive {
				return &client.ExitError{Code: 0, Err: errors.New("interrupted")}
			}
			fmt.Fprintln(stderr, "\n[cancelling the turn; Ctrl-C again to quit]")
			_ = send(&pb.AgentRequest{Request: &pb.AgentRequest_Cancel{Cancel: &pb.CancelRequest{Reason: "user pressed Ctrl-C"}}})
			go func() {
				select {
				case <-sigs:
					cancel()
				case <-ctx.Done():
				}
			}()
		}
	}
}

func userMessage(text string) *pb.AgentRequest {
	return &pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: text}}}
}

func permission(id string, d pb.PermissionDecision) *pb.AgentRequest {
	return &pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{RequestId: id, Decision: d}}}
}

func parseDecision(s string) (pb.PermissionDecision, bool) {
	switch strings.ToLower(s) {
	case "y", "yes":
		return pb.PermissionDecision_ALLOW_ONCE, true
	case "a", "always":
		return pb.PermissionDecision_ALLOW_SESSION, true
	case "n", "no":
		return pb.PermissionDecision_DENY, true
	}
	return 0, false
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "desc = "); i >= 0 {
		s = s[i+7:]
	}
	return s
}
