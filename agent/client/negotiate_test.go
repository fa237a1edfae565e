package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// echoAgent answers every Converse request with a TextDelta, and records the
// client version header of each call.
type echoAgent struct {
	pb.UnimplementedAgentServiceServer
	versions chan string
}

func (a *echoAgent) Converse(stream pb.AgentService_ConverseServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	select {
	case a.versions <- strings.Join(md.Get(server.MDClientVersion), ","):
	default:
	}
	for seq := uint64(1); ; seq++ {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		text := "started"
		if req.GetStart() == nil {
			text = "got it"
		}
		if err := stream.Send(&pb.AgentEvent{Sequence: seq, Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: text}}}); err != nil {
			return err
		}
	}
}

func (a *echoAgent) ListSessions(context.Context, *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	return &pb.ListSessionsResponse{}, nil
}

// countingVersion counts NegotiateCapabilities calls.
type countingVersion struct {
	*server.Version
	negotiations atomic.Int32
}

func (v *countingVersion) NegotiateCapabilities(ctx context.Context, req *pb.NegotiateRequest) (*pb.NegotiateResponse, error) {
	v.negotiations.Add(1)
	return v.Version.NegotiateCapabilities(ctx, req)
}

// serve starts an in-process agent on 127.0.0.1:0 with the version
// interceptors, as the daemon chains them.
func serve(t *testing.T, v *server.Version) (addr string, cv *countingVersion, agent *echoAgent) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(v.UnaryInterceptor), grpc.ChainStreamInterceptor(v.StreamInterceptor))
	cv = &countingVersion{Version: v}
	agent = &echoAgent{versions: make(chan string, 16)}
	pb.RegisterVersionServiceServer(srv, cv)
	pb.RegisterAgentServiceServer(srv, agent)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), cv, agent
}

func dialVersion(t *testing.T, addr, version string, n *client.Negotiation) *grpc.ClientConn {
	t.Helper()
	conn, err := client.Dial(addr, client.DialOptions{Version: version, Negotiation: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestClientVersionMetadataMatchesServer(t *testing.T) {
	if client.ClientVersionMetadata != server.MDClientVersion {
		t.Fatalf("client sends %q, agent reads %q", client.ClientVersionMetadata, server.MDClientVersion)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestOldClientRefused: a client below the minimum cannot converse, whether
// it negotiates (the CLI) or only sends its version (a script), and is told
// how to upgrade; it may still ask for the versions.
func TestOldClientRefused(t *testing.T) {
	ctx := ctxFor(t)
	addr, cv, _ := serve(t, &server.Version{ServerVersion: "0.3.0", MinClientVersion: "0.2.0", Log: slog.New(slog.DiscardHandler)})
	const hint = "betcode 0.1.0 is too old for this agent (minimum 0.2.0): upgrade from " + server.UpgradeURL

	t.Run("negotiating", func(t *testing.T) {
		n := &client.Negotiation{Request: &pb.NegotiateRequest{ClientType: "cli"}}
		conn := dialVersion(t, addr, "0.1.0", n)
		_, err := client.Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{}, 0)
		var refused *client.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), hint) {
			t.Fatalf("Start = %v, want a refusal saying %q", err, hint)
		}
		if status.Code(err) != codes.FailedPrecondition || client.Retryable(err) || client.ExitCode(err) != client.ExitConnection {
			t.Errorf("refusal: code %v, retryable %v, exit %d", status.Code(err), client.Retryable(err), client.ExitCode(err))
		}
		// Cached: a second Converse on the connection does not ask again.
		before := cv.negotiations.Load()
		if _, err := client.Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{}, 0); !errors.As(err, &refused) {
			t.Fatalf("second Start = %v", err)
		}
		if got := cv.negotiations.Load(); got != before {
			t.Errorf("negotiated again: %d calls, want %d", got, before)
		}
	})

	t.Run("header only", func(t *testing.T) {
		conn := dialVersion(t, addr, "0.1.0", nil)
		api := pb.NewAgentServiceClient(conn)
		_, err := api.ListSessions(ctx, &pb.ListSessionsRequest{})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), hint) || client.BetCodeCode(err) != server.CodeClientTooOld {
			t.Fatalf("ListSessions = %v, want FAILED_PRECONDITION %q", err, hint)
		}
		stream, err := api.Converse(ctx)
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.FailedPrecondition || client.ExitCode(err) != client.ExitConnection {
			t.Fatalf("Converse = %v, want FAILED_PRECONDITION", err)
		}
		resp, err := pb.NewVersionServiceClient(conn).GetVersion(ctx, &pb.GetVersionRequest{})
		if err != nil || resp.Constraints.MinClientVersion != "0.2.0" {
			t.Fatalf("GetVersion = %v, %v", resp, err)
		}
	})

	t.Run("no header", func(t *testing.T) {
		conn := dialVersion(t, addr, "", nil)
		if _, err := pb.NewAgentServiceClient(conn).ListSessions(ctx, &pb.ListSessionsRequest{}); err != nil {
			t.Fatalf("a call without a version is served: %v", err)
		}
	})
}

// TestCurrentClientNegotiatesOnceAndConverses: a current client negotiates
// once per connection before its first Converse, caches the grant, sends
// its version on every call, and gets one DeprecationWarning per deprecated
// feature it uses, which the renderer prints once.
func TestCurrentClientNegotiatesOnceAndConverses(t *testing.T) {
	ctx := ctxFor(t)
	addr, cv, agent := serve(t, &server.Version{ServerVersion: "0.3.0", MinClientVersion: "0.2.0"})
	var warnings []string
	n := &client.Negotiation{
		Request:   &pb.NegotiateRequest{ClientType: "cli", RequestedFeatures: []string{"streaming_deltas", "subagent_orchestration"}},
		OnWarning: func(w string) { warnings = append(warnings, w) },
	}
	conn := dialVersion(t, addr, "0.2.0-dev", n)
	if n.Granted("streaming_deltas") {
		t.Fatal("granted before negotiating")
	}
	api := pb.NewAgentServiceClient(conn)
	var stderr bytes.Buffer
	r := &client.Renderer{Out: io.Discard, Err: &stderr}
	for range 2 {
		conv, err := client.Start(ctx, api, &pb.StartConversation{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if v := <-agent.versions; v != "0.2.0-dev" {
			t.Errorf("client version header %q", v)
		}
		ev, err := conv.Recv(ctx)
		if err != nil || ev.GetTextDelta().GetText() != "started" {
			t.Fatalf("first event %v, %v", ev, err)
		}
		// The legacy permission format, twice: one warning per stream.
		legacy := &pb.AgentRequest{Request: &pb.AgentRequest_Permission{Permission: &pb.PermissionResponse{RequestId: "r1"}}}
		var deprecations, replies int
		for range 2 {
			if err := conv.Send(legacy); err != nil {
				t.Fatal(err)
			}
			for {
				ev, err := conv.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				r.Event(ev)
				if w := ev.GetDeprecationWarning(); w != nil {
					deprecations++
					if w.Feature != server.LegacyPermissionFormat || w.Severity != pb.Severity_WARNING || w.RemovalVersion == "" || ev.Sequence != 0 {
						t.Errorf("warning %v (sequence %d)", w, ev.Sequence)
					}
					continue
				}
				replies++
				break
			}
		}
		if deprecations != 1 || replies != 2 {
			t.Errorf("%d deprecation warnings and %d replies, want 1 and 2", deprecations, replies)
		}
		conv.Close()
	}
	if got := cv.negotiations.Load(); got != 1 {
		t.Errorf("%d negotiations on one connection, want 1", got)
	}
	if !n.Granted("streaming_deltas") || n.Granted("subagent_orchestration") {
		t.Errorf("granted %v", n.Response().GetGrantedFeatures())
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "subagent_orchestration is not enabled") {
		t.Errorf("negotiation warnings %q", warnings)
	}
	if got := strings.Count(stderr.String(), "legacy_permission_format is deprecated"); got != 1 {
		t.Errorf("renderer printed the deprecation %d times:\n%s", got, stderr.String())
	}
}

// TestNegotiationAgainstAgentWithoutVersionService: an agent from before
// VersionService is talked to as before.
func TestNegotiationAgainstAgentWithoutVersionService(t *testing.T) {
	ctx := ctxFor(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterAgentServiceServer(srv, &echoAgent{versions: make(chan string, 4)})
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	n := &client.Negotiation{}
	conn := dialVersion(t, lis.Addr().String(), "0.2.0", n)
	conv, err := client.Start(ctx, pb.NewAgentServiceClient(conn), &pb.StartConversation{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if _, err := conv.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	if !n.Response().GetAccepted() {
		t.Errorf("negotiation %v", n.Response())
	}
}
