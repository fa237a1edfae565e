package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// printJSON writes m as one line of protobuf JSON.
func printJSON(out io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// statusText is "RUNNING" for SESSION_STATUS_RUNNING, "-" for unset.
func statusText(st pb.SessionStatus) string {
	if st == pb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(st.String(), "SESSION_STATUS_")
}

func providerText(kind pb.SessionProvider) string {
	if kind == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		return "-"
	}
	return provider.Name(kind)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().Local().Format(time.DateTime)
}

// printSession writes one session as "key: value" lines, or JSON.
func printSession(out io.Writer, ms *pb.ManagedSession, asJSON bool) error {
	if asJSON {
		return printJSON(out, ms)
	}
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "%s:\t%s\n", k, v) }
	row("id", ms.GetId())
	row("name", orDash(ms.GetAgentName()))
	row("status", statusText(ms.GetStatus()))
	row("provider", providerText(ms.GetProvider()))
	row("model", orDash(ms.GetModel()))
	row("directory", ms.GetWorkingDirectory())
	if ms.GetTaskId() != "" {
		row("task", ms.GetTaskId())
	}
	tokens := fmt.Sprintf("%d in / %d out", ms.GetTokensInput(), ms.GetTokensOutput())
	if ms.GetMaxTokens() > 0 {
		tokens += fmt.Sprintf(" (budget %d)", ms.GetMaxTokens())
	}
	row("tokens", tokens)
	if ms.GetPid() != 0 {
		row("pid", fmt.Sprint(ms.GetPid()))
	}
	row("restarts", fmt.Sprint(ms.GetRestartCount()))
	row("created", stamp(ms.GetCreatedAt()))
	row("started", stamp(ms.GetStartedAt()))
	row("last activity", stamp(ms.GetLastActivityAt()))
	if ms.GetEndedAt() != nil {
		row("ended", stamp(ms.GetEndedAt()))
	}
	if ms.GetErrorMessage() != "" {
		row("error", ms.GetErrorMessage())
	}
	return w.Flush()
}

// printSessionTable writes one line per session.
func printSessionTable(out io.Writer, list []*pb.ManagedSession) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tPROVIDER\tSTATUS\tMODEL\tTOKENS IN/OUT\tCREATED\tDIRECTORY")
	for _, ms := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", ms.GetId(), orDash(ms.GetAgentName()), providerText(ms.GetProvider()),
			statusText(ms.GetStatus()), orDash(ms.GetModel()), ms.GetTokensInput(), ms.GetTokensOutput(),
			stamp(ms.GetCreatedAt()), ms.GetWorkingDirectory())
	}
	return w.Flush()
}

// printStatusEvent writes "TIME ID PREVIOUS -> NEW  message", or JSON.
func printStatusEvent(out io.Writer, ev *pb.SessionStatusEvent, asJSON bool) error {
	if asJSON {
		return printJSON(out, ev)
	}
	line := fmt.Sprintf("%s  %s  %s -> %s", ev.GetTimestamp().AsTime().Local().Format(time.TimeOnly), ev.GetSessionId(),
		statusText(ev.GetPreviousStatus()), statusText(ev.GetNewStatus()))
	if ev.GetMessage() != "" {
		line += "  " + ev.GetMessage()
	}
	_, err := fmt.Fprintln(out, line)
	return err
}

// activityPrinter writes a SendMessage stream as chat does: tool calls on
// one line, results under them, the completion's text, usage on stderr.
type activityPrinter struct {
	out, errOut io.Writer
	json        bool
}

func (p *activityPrinter) print(ev *pb.SessionActivityEvent) error {
	if p.json {
		return printJSON(p.out, ev)
	}
	var err error
	switch ev.GetType() {
	case pb.ActivityType_ACTIVITY_TYPE_THINKING:
		_, err = fmt.Fprintf(p.errOut, "… %s\n", ev.GetContent())
	case pb.ActivityType_ACTIVITY_TYPE_TOOL_CALL:
		_, err = fmt.Fprintf(p.out, "⏺ %s(%s)\n", ev.GetToolName(), firstLine(ev.GetContent(), 100))
	case pb.ActivityType_ACTIVITY_TYPE_TOOL_RESULT:
		mark := "⎿"
		if !ev.GetToolSuccess() {
			mark = "⎿ ✗"
		}
		_, err = fmt.Fprintf(p.out, "  %s %s\n", mark, orDash(firstLine(ev.GetContent(), 100)))
	case pb.ActivityType_ACTIVITY_TYPE_STATUS:
		_, err = fmt.Fprintf(p.errOut, "! %s\n", ev.GetContent())
	case pb.ActivityType_ACTIVITY_TYPE_ERROR:
		_, err = fmt.Fprintf(p.errOut, "error: %s\n", ev.GetContent())
	case pb.ActivityType_ACTIVITY_TYPE_COMPLETION:
		text := ev.GetContent()
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if _, err = io.WriteString(p.out, text); err == nil {
			_, err = fmt.Fprintf(p.errOut, "tokens: %d in / %d out\n", ev.GetTokensInput(), ev.GetTokensOutput())
		}
	}
	return err
}

// firstLine is s's first line, cut to n runes.
func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	} else if cut {
		return s + " …"
	}
	return s
}
