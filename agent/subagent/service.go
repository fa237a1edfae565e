package subagent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Options configure a Service. Zero values take the defaults in brackets.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// MaxParallel is the most steps of one orchestration running at once
	// (the daemon's subagent-max-parallel, at most MaxParallelLimit); a
	// request's max_parallel may only lower it [4].
	MaxParallel int
	// MaxPerParent is the most unfinished subagents SpawnSubagent starts
	// for one parent session (SUBAGENT_LIMIT beyond) [16].
	MaxPerParent int
	// MaxCostUSD stops an orchestration whose steps' summed cost_usd
	// exceeds it: no further step starts, the running ones are cancelled
	// and it ends FAILED. 0: no limit. (The proto has no per-request
	// field for it yet.)
	MaxCostUSD float64
	// Specs resolves SubagentSpec.teammate_spec_id; nil: a spec naming
	// one is refused (FAILED_PRECONDITION).
	Specs SpecResolver
	// Worktrees makes the worktrees of create_worktree; nil: refused.
	Worktrees Worktrees
	// Store keeps subagents and orchestrations across restarts [the
	// manager's event log].
	Store KV
}

// MaxParallelLimit is the highest Options.MaxParallel.
const MaxParallelLimit = 16

func (o *Options) setDefaults(m *session.Manager) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = 4
	}
	if o.MaxParallel > MaxParallelLimit {
		o.Logger.Warn("subagent: max parallel steps above the limit; using the limit", "max_parallel", o.MaxParallel, "limit", MaxParallelLimit)
		o.MaxParallel = MaxParallelLimit
	}
	// Each running step holds a slot of the CLI pool, and its parent
	// session one more: a step that finds the pool full of running turns
	// fails, so the cap stays below the pool's size.
	if m != nil && o.MaxParallel >= m.MaxProcesses() {
		capped := max(1, m.MaxProcesses()-1)
		o.Logger.Warn("subagent: max parallel steps not below max-processes; capping so that steps do not fail for a full CLI pool (raise max-processes)",
			"max_parallel", o.MaxParallel, "max_processes", m.MaxProcesses(), "using", capped)
		o.MaxParallel = capped
	}
	if o.MaxPerParent <= 0 {
		o.MaxPerParent = 16
	}
	if o.Store == nil && m != nil {
		o.Store = m.Log()
	}
}

// Service implements pb.SubagentServiceServer over a session.Manager.
type Service struct {
	pb.UnimplementedSubagentServiceServer

	m   *session.Manager
	opt Options

	// ctx ends with Close or when the manager closes; every subagent and
	// orchestration goroutine (counted by wg) ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	store store

	mu        sync.Mutex
	subagents map[string]*subagent
	order     []*subagent // oldest first
	orchs     map[string]*orchestration
	orchOrder []*orchestration  // oldest first
	worktrees map[string]string // worktree id -> unfinished subagent using it
}

var _ pb.SubagentServiceServer = (*Service)(nil)

// New returns a Service over m, with the subagents and orchestrations of
// earlier runs of the agent (those that were running reported FAILED,
// "interrupted by an agent restart"). It stops (cancelling every subagent
// and orchestration) when Close is called or m closes.
func New(m *session.Manager, opt Options) *Service {
	opt.setDefaults(m)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{m: m, opt: opt, ctx: ctx, cancel: cancel, store: store{kv: opt.Store},
		subagents: map[string]*subagent{}, orchs: map[string]*orchestration{}, worktrees: map[string]string{}}
	s.restore(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.followManager()
	}()
	return s
}

// followManager returns once the manager closes (or the service stops),
// and stops the service then: session streams end at that point anyway.
func (s *Service) followManager() {
	defer s.cancel()
	for {
		err := s.m.Watch(s.ctx, session.WatchOptions{}, func(*pb.SessionUpdate) error { return nil })
		var overflow *session.WatchOverflowError
		if errors.As(err, &overflow) && s.ctx.Err() == nil {
			continue
		}
		return
	}
}

// Close cancels every subagent and orchestration and waits for their
// goroutines.
func (s *Service) Close() {
	s.mu.Lock()
	s.cancel() // under mu: no goroutine starts after it (see start)
	s.mu.Unlock()
	s.wg.Wait()
}

// start runs f on a goroutine Close waits for, unless the service has
// stopped; it reports whether f runs.
func (s *Service) start(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// SpawnSubagent starts one subagent for a parent session.
func (s *Service) SpawnSubagent(ctx context.Context, req *pb.SpawnSubagentRequest) (*pb.SpawnSubagentResponse, error) {
	spec := req.GetSpec()
	if err := checkSpec(spec, ""); err != nil {
		return nil, err
	}
	spec, err := s.resolveSpec(ctx, spec, "")
	if err != nil {
		return nil, err
	}
	sa, err := s.spawn(ctx, spawnRequest{parent: req.GetParentSessionId(), spec: spec, prompt: spec.GetPrompt(), limit: true})
	if err != nil {
		return nil, err
	}
	return &pb.SpawnSubagentResponse{Subagent: sa.proto()}, nil
}

// ListSubagents lists subagents, oldest first.
func (s *Service) ListSubagents(_ context.Context, req *pb.ListSubagentsRequest) (*pb.ListSubagentsResponse, error) {
	s.mu.Lock()
	all := slices.Clone(s.order)
	s.mu.Unlock()
	out := &pb.ListSubagentsResponse{}
	for _, sa := range all {
		if p := req.GetParentSessionId(); p != "" && sa.parent != p {
			continue
		}
		if o := req.GetOrchestrationId(); o != "" && sa.orch != o {
			continue
		}
		v := sa.proto()
		if st := req.GetStatuses(); len(st) > 0 && !slices.Contains(st, v.GetStatus()) {
			continue
		}
		out.Subagents = append(out.Subagents, v)
	}
	return out, nil
}

// CancelSubagent cancels a pending or running subagent's turn.
func (s *Service) CancelSubagent(ctx context.Context, req *pb.CancelSubagentRequest) (*pb.CancelSubagentResponse, error) {
	sa, err := s.subagent(req.GetSubagentId())
	if err != nil {
		return nil, err
	}
	active := s.cancelSubagent(ctx, sa, req.GetReason())
	if active {
		// Answer with the subagent's end, as the caller asked to stop it.
		select {
		case <-sa.done:
		case <-ctx.Done():
			return nil, sessionStatus(ctx.Err(), "cancel subagent")
		}
	}
	return &pb.CancelSubagentResponse{WasActive: active, Subagent: sa.proto()}, nil
}

// CreateOrchestration validates a plan and starts running it.
func (s *Service) CreateOrchestration(ctx context.Context, req *pb.CreateOrchestrationRequest) (*pb.CreateOrchestrationResponse, error) {
	parent, err := s.m.Get(ctx, req.GetParentSessionId())
	if err != nil {
		return nil, sessionStatus(err, "parent session")
	}
	// The steps as they will run: teammate specs applied once, so that
	// every attempt runs the same spec.
	steps := make([]*pb.OrchestrationStep, 0, len(req.GetSteps()))
	for i, st := range req.GetSteps() {
		what := stepName(i, st.GetId())
		if err := checkSpec(st.GetSpec(), what); err != nil {
			return nil, err
		}
		if n := st.GetMaxAttempts(); n > MaxAttemptsLimit {
			return nil, fail(codes.InvalidArgument, server.CodeInvalidArgument, "%s: max_attempts %d is more than %d", what, n, MaxAttemptsLimit)
		}
		if _, err := planSession(parent, st.GetSpec(), what); err != nil {
			return nil, err
		}
		spec, err := s.resolveSpec(ctx, st.GetSpec(), what)
		if err != nil {
			return nil, err
		}
		run := proto.CloneOf(st)
		run.Spec = spec
		steps = append(steps, run)
	}
	plan := proto.CloneOf(req)
	plan.Steps = steps
	o, err := newOrchestration(uuid.NewString(), plan, s.opt.MaxParallel, s.opt.MaxCostUSD, s.opt.Now)
	var perr *PlanError
	if errors.As(err, &perr) {
		return nil, fail(codes.InvalidArgument, CodeDAGCycle, "invalid orchestration plan: %s", perr.Msg)
	}
	if err != nil {
		return nil, err
	}
	o.save = s.saveOrchestration
	log := s.opt.Logger.With("orchestration_id", o.id, "parent_session_id", o.parent)
	// Saved and registered before it starts, so that its first step's
	// update never precedes its record.
	o.persist()
	s.mu.Lock()
	s.orchs[o.id] = o
	s.orchOrder = insertOrdered(s.orchOrder, o, func(o *orchestration) (time.Time, string) { return o.created, o.id })
	s.mu.Unlock()
	started := s.start(func() {
		o.run(s.ctx, s.runStep(o))
		snap := o.snapshot()
		o.mu.Lock()
		reason := o.reason
		o.mu.Unlock()
		log.Info("subagent: orchestration ended", "status", snap.GetStatus().String(), "reason", reason, "cost_usd", o.totalCost())
	})
	if !started {
		// The agent is stopping: it never ran, and the next agent reports
		// it interrupted.
		o.interrupt()
		o.finish(pb.OrchestrationStatus_ORCHESTRATION_STATUS_CANCELLED)
		close(o.done)
		return nil, sessionStatus(session.ErrClosed, "create orchestration")
	}
	log.Info("subagent: orchestration started", "steps", len(o.steps), "max_parallel", o.limit)
	return &pb.CreateOrchestrationResponse{Orchestration: o.snapshot()}, nil
}

// runStep runs an attempt of an orchestration's step as a subagent.
func (s *Service) runStep(o *orchestration) stepRun {
	return func(ctx context.Context, step *pb.OrchestrationStep, prompt string, attempt uint32, started func(string)) stepResult {
		sa, err := s.spawn(ctx, spawnRequest{parent: o.parent, spec: step.GetSpec(), prompt: prompt, orch: o.id, step: step.GetId(), attempt: attempt})
		if err != nil {
			return stepResult{status: pb.SubagentStatus_SUBAGENT_STATUS_FAILED, err: status.Convert(err).Message(), interrupted: isShutdown(err)}
		}
		started(sa.id)
		select {
		case <-sa.done:
		case <-ctx.Done():
			s.cancelSubagent(context.WithoutCancel(ctx), sa, "orchestration stopped")
			<-sa.done
		}
		return sa.stepResult()
	}
}

// WatchOrchestration streams a snapshot, the step updates and a final
// snapshot.
func (s *Service) WatchOrchestration(req *pb.WatchOrchestrationRequest, stream pb.SubagentService_WatchOrchestrationServer) error {
	o, err := s.orchestration(req.GetOrchestrationId())
	if err != nil {
		return err
	}
	return o.watch(stream.Context(), stream.Send)
}

// CancelOrchestration cancels every unfinished step and returns the
// orchestration once it ended.
func (s *Service) CancelOrchestration(ctx context.Context, req *pb.CancelOrchestrationRequest) (*pb.CancelOrchestrationResponse, error) {
	o, err := s.orchestration(req.GetOrchestrationId())
	if err != nil {
		return nil, err
	}
	s.opt.Logger.Info("subagent: cancelling orchestration", "orchestration_id", o.id, "reason", req.GetReason())
	o.cancel()
	select {
	case <-o.done:
	case <-ctx.Done():
		return nil, sessionStatus(ctx.Err(), "cancel orchestration")
	}
	return &pb.CancelOrchestrationResponse{Orchestration: o.snapshot()}, nil
}

// ListOrchestrations lists orchestrations, oldest first.
func (s *Service) ListOrchestrations(_ context.Context, req *pb.ListOrchestrationsRequest) (*pb.ListOrchestrationsResponse, error) {
	s.mu.Lock()
	all := slices.Clone(s.orchOrder)
	s.mu.Unlock()
	out := &pb.ListOrchestrationsResponse{}
	for _, o := range all {
		if p := req.GetParentSessionId(); p != "" && o.parent != p {
			continue
		}
		out.Orchestrations = append(out.Orchestrations, o.snapshot())
	}
	return out, nil
}

func (s *Service) subagent(id string) (*subagent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sa := s.subagents[id]; sa != nil {
		return sa, nil
	}
	return nil, fail(codes.NotFound, CodeSubagentNotFound, "subagent %q does not exist", id)
}

func (s *Service) orchestration(id string) (*orchestration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.orchs[id]; o != nil {
		return o, nil
	}
	return nil, fail(codes.NotFound, CodeOrchestrationNotFound, "orchestration %q does not exist", id)
}

// callUser is the user the relay made the call for, or "" locally.
func callUser(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(server.MDUser); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
