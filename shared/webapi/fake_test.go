package webapi

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

const goodToken = "bct_good"

// fakeAgent is an in-process gRPC server with the few behaviours the
// handler's tests need: sessions with stored events, a WatchSessions feed,
// permission rules, and the agent's token check and error details.
type fakeAgent struct {
	pb.UnimplementedAgentServiceServer
	pb.UnimplementedConfigServiceServer
	pb.UnimplementedVersionServiceServer

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	sessions []*pb.SessionSummary
	events   map[string][]*pb.AgentEvent
	updates  []*pb.SessionUpdate // WatchSessions' feed after the snapshot
	allow    []string
	deny     []string
	external []string // allow rules only GetPermissions reports
	lastMD   metadata.MD
	queued   []*pb.QueueMessageRequest
	started  []*pb.StartSessionRequest
	answers  []*pb.AnswerPermissionRequest
	failWith error         // every AgentService unary call fails with it when set
	watches  int           // WatchSessions calls
	watchEnd chan struct{} // receives when a WatchSessions call ends
	watchErr chan error    // ends a WatchSessions call with the error
	team     *fakeTeam     // TeamService (team_test.go)
}

// movingSession is a session whose machine is moving between relay
// replicas: ResumeSession answers MACHINE_OFFLINE with the relay's retry hint.
const movingSession = "moving"

func betcodeErr(c codes.Code, reason, msg string, md map[string]string) error {
	st, _ := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: md})
	return st.Err()
}

func newFakeAgent() *fakeAgent {
	f := &fakeAgent{changed: make(chan struct{}), events: map[string][]*pb.AgentEvent{}, watchEnd: make(chan struct{}, 100), watchErr: make(chan error, 1)}
	f.team = newFakeTeam(f)
	return f
}

// change runs fn under the lock and wakes streams.
func (f *fakeAgent) change(fn func()) {
	f.mu.Lock()
	fn()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeAgent) addSession(s *pb.SessionSummary) {
	f.change(func() { f.sessions = append(f.sessions, s) })
}

// appendEvent stores an event with the session's next sequence.
func (f *fakeAgent) appendEvent(id string, ev *pb.AgentEvent) uint64 {
	var seq uint64
	f.change(func() {
		seq = uint64(len(f.events[id])) + 1
		ev.Sequence, ev.Timestamp = seq, timestamppb.Now()
		f.events[id] = append(f.events[id], ev)
	})
	return seq
}

func (f *fakeAgent) pushUpdate(u *pb.SessionUpdate) {
	f.change(func() { f.updates = append(f.updates, u) })
}

func (f *fakeAgent) auth(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.lastMD = md
	f.mu.Unlock()
	if v := md.Get("authorization"); len(v) == 1 && v[0] == "Bearer "+goodToken {
		return nil
	}
	return status.Error(codes.Unauthenticated, "this agent's TCP listener needs its local token")
}

func (f *fakeAgent) metadata() metadata.MD {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastMD
}

func (f *fakeAgent) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := f.auth(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (f *fakeAgent) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := f.auth(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

func (f *fakeAgent) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failWith
}

func (f *fakeAgent) ListSessions(context.Context, *pb.ListSessionsRequest) (*pb.ListSessionsResponse, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.ListSessionsResponse{Total: uint32(len(f.sessions))}
	for _, s := range f.sessions {
		out.Sessions = append(out.Sessions, proto.Clone(s).(*pb.SessionSummary))
	}
	return out, nil
}

func (f *fakeAgent) find(id string) *pb.SessionSummary {
	for _, s := range f.sessions {
		if s.Id == id {
			return s
		}
	}
	return nil
}

func (f *fakeAgent) ResumeSession(req *pb.ResumeSessionRequest, stream pb.AgentService_ResumeSessionServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	follow := slices.Equal(md.Get("x-betcode-follow"), []string{"true"})
	if req.SessionId == movingSession {
		// As the relay answers while the session's machine moves between
		// its replicas.
		return betcodeErr(codes.Unavailable, "MACHINE_OFFLINE", "Target machine is not connected", map[string]string{"retry_after_ms": "100"})
	}
	f.mu.Lock()
	if f.find(req.SessionId) == nil {
		f.mu.Unlock()
		return betcodeErr(codes.NotFound, "SESSION_NOT_FOUND", "Session does not exist", nil)
	}
	if last := uint64(len(f.events[req.SessionId])); req.FromSequence > last {
		f.mu.Unlock()
		return betcodeErr(codes.OutOfRange, "INVALID_ARGUMENT", fmt.Sprintf("from_sequence %d is past the session's last sequence %d", req.FromSequence, last), nil)
	}
	f.mu.Unlock()
	next := req.FromSequence
	for {
		f.mu.Lock()
		evs, changed := f.events[req.SessionId], f.changed
		f.mu.Unlock()
		for next < uint64(len(evs)) {
			if err := stream.Send(evs[next]); err != nil {
				return err
			}
			next++
		}
		if !follow {
			return nil
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func (f *fakeAgent) WatchSessions(_ *pb.WatchSessionsRequest, stream pb.AgentService_WatchSessionsServer) error {
	defer func() { f.watchEnd <- struct{}{} }()
	f.mu.Lock()
	f.watches++
	var snap []*pb.SessionUpdate
	for _, s := range f.sessions {
		snap = append(snap, &pb.SessionUpdate{Session: proto.Clone(s).(*pb.SessionSummary)})
	}
	next := len(f.updates)
	f.mu.Unlock()
	for _, u := range snap {
		if err := stream.Send(u); err != nil {
			return err
		}
	}
	if err := stream.Send(&pb.SessionUpdate{SnapshotDone: true}); err != nil {
		return err
	}
	for {
		f.mu.Lock()
		ups, changed := f.updates, f.changed
		f.mu.Unlock()
		for ; next < len(ups); next++ {
			if err := stream.Send(ups[next]); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case err := <-f.watchErr:
			return err
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func (f *fakeAgent) StartSession(_ context.Context, req *pb.StartSessionRequest) (*pb.StartSessionResponse, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	s := &pb.SessionSummary{Id: fmt.Sprintf("s%d", len(f.sessions)+1), WorkingDirectory: req.WorkingDirectory, Name: req.Name,
		AgentStatus: pb.AgentStatus_THINKING, CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now(), Provider: req.Provider}
	if s.Provider == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED { // the agent's default
		s.Provider = pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE
	}
	f.mu.Lock()
	f.started = append(f.started, req)
	f.mu.Unlock()
	f.addSession(s)
	if req.Message != nil {
		f.mu.Lock()
		f.queued = append(f.queued, &pb.QueueMessageRequest{SessionId: s.Id, Message: req.Message})
		f.mu.Unlock()
	}
	return &pb.StartSessionResponse{Session: s}, nil
}

func (f *fakeAgent) QueueMessage(_ context.Context, req *pb.QueueMessageRequest) (*pb.QueueMessageResponse, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.find(req.SessionId) == nil {
		return nil, betcodeErr(codes.NotFound, "SESSION_NOT_FOUND", "Session does not exist", nil)
	}
	f.queued = append(f.queued, req)
	return &pb.QueueMessageResponse{Accepted: true, Sequence: uint64(len(f.events[req.SessionId]))}, nil
}

func (f *fakeAgent) AnswerPermission(_ context.Context, req *pb.AnswerPermissionRequest) (*pb.AnswerPermissionResponse, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.answers {
		if a.Response.RequestId == req.Response.RequestId {
			return nil, betcodeErr(codes.FailedPrecondition, "PERMISSION_NOT_PENDING", "the request is not pending", nil)
		}
	}
	f.answers = append(f.answers, req)
	return &pb.AnswerPermissionResponse{Sequence: 7}, nil
}

func (f *fakeAgent) CancelTurn(context.Context, *pb.CancelTurnRequest) (*pb.CancelTurnResponse, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	return &pb.CancelTurnResponse{}, nil
}

func (f *fakeAgent) GetVersion(context.Context, *pb.GetVersionRequest) (*pb.GetVersionResponse, error) {
	return &pb.GetVersionResponse{}, nil
}

func (f *fakeAgent) GetSettings(context.Context, *pb.GetSettingsRequest) (*pb.Settings, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.Settings{Permissions: &pb.PermissionRules{Allow: slices.Clone(f.allow), Deny: slices.Clone(f.deny)}}, nil
}

func (f *fakeAgent) UpdateSettings(_ context.Context, req *pb.UpdateSettingsRequest) (*pb.Settings, error) {
	if req.Scope != pb.ConfigScope_CONFIG_SCOPE_USER {
		return nil, status.Error(codes.InvalidArgument, "scope")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range req.UpdateMask.GetPaths() {
		switch p {
		case "permissions.allow":
			f.allow = req.Settings.GetPermissions().GetAllow()
		case "permissions.deny":
			f.deny = req.Settings.GetPermissions().GetDeny()
		default:
			return nil, status.Error(codes.InvalidArgument, "mask "+p)
		}
	}
	return &pb.Settings{}, nil
}

func (f *fakeAgent) GetPermissions(context.Context, *pb.GetPermissionsRequest) (*pb.PermissionRules, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.PermissionRules{Allow: append(slices.Clone(f.allow), f.external...), Deny: slices.Clone(f.deny)}, nil
}

// testServer is a Handler on a fake agent behind an httptest server.
type testServer struct {
	fake *fakeAgent
	h    *Handler
	srv  *httptest.Server
	// feeds is signalled when a subscription joins or leaves a shared feed.
	feeds chan struct{}
}

func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	fake := newFakeAgent()
	gs := grpc.NewServer(grpc.UnaryInterceptor(fake.unary), grpc.StreamInterceptor(fake.stream), grpc.InitialWindowSize(1<<20), grpc.InitialConnWindowSize(4<<20))
	pb.RegisterAgentServiceServer(gs, fake)
	pb.RegisterConfigServiceServer(gs, fake)
	pb.RegisterVersionServiceServer(gs, fake)
	pb.RegisterTeamServiceServer(gs, fake.team)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///fake",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	opts.Conn = conn
	if opts.Version == "" {
		opts.Version = "9.9.9"
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	feeds := make(chan struct{}, 1)
	h.timing.feedChanged = func() {
		select {
		case feeds <- struct{}{}:
		default:
		}
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		conn.Close()
		gs.Stop()
		<-served
	})
	return &testServer{fake: fake, h: h, srv: srv, feeds: feeds}
}
