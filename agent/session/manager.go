package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/transcripts"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Manager owns every session of one agent.
type Manager struct {
	cfg Config
	log *eventlog.Log

	mu       sync.Mutex
	sessions map[string]*Session
	closing  bool
	running  int            // CLI processes holding a pool slot
	procs    sync.WaitGroup // one per running CLI reader

	transcripts *transcripts.Lister

	// settings are the ones that can change while running (live.go);
	// settingsMu serialises their writers.
	settings   atomic.Pointer[live]
	settingsMu sync.Mutex

	// draining refuses new turns (drain.go); turnEnded, under turnMu, is
	// closed when a turn ends, to wake WaitTurns.
	draining  atomic.Bool
	turnMu    sync.Mutex
	turnEnded chan struct{}

	// feed announces session changes to WatchSessions (feed.go).
	feed feed
	// gone holds the ids of sessions deleted since the agent started, under
	// mu, so that a Get racing a Delete cannot load the session again.
	gone map[string]struct{}
	// starting holds the idempotency keys of StartSession calls in flight,
	// under startMu; a repeat waits for the channel to close.
	startMu  sync.Mutex
	starting map[string]chan struct{}

	// worktrees resolves worktree ids (worktree.go); nil: none managed.
	worktrees Worktrees
}

// Open opens (or creates) the event log at dbPath and returns a Manager.
// Sessions whose turn was cut short by a previous crash of the agent get an
// ErrorEvent and a TurnComplete so that no client waits for them forever.
func Open(ctx context.Context, cfg Config, dbPath string) (*Manager, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ClaudeHome == "" {
		cfg.ClaudeHome, _ = os.UserHomeDir()
	}
	if cfg.DefaultDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("session: working directory: %w", err)
		}
		cfg.DefaultDir = wd
	}
	m := &Manager{cfg: cfg, sessions: map[string]*Session{}, transcripts: &transcripts.Lister{Home: cfg.ClaudeHome, Log: cfg.Logger}}
	m.settings.Store(&live{
		permissions: cfg.Permissions, permissionTimeout: cfg.PermissionTimeout,
		defaultModel: cfg.DefaultModel, autoCompactTokens: cfg.AutoCompactTokens,
	})
	l, err := eventlog.Open(ctx, dbPath, eventlog.Options{OnCommit: m.onCommit, Logger: cfg.Logger, Metrics: cfg.LogMetrics})
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	m.log = l
	if err := m.recover(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return m, nil
}

// Log exposes the event log (for health checks and benchmarks).
func (m *Manager) Log() *eventlog.Log { return m.log }

// recover closes turns that were running when the agent last died.
func (m *Manager) recover(ctx context.Context) error {
	all, _, err := m.log.ListSessions(ctx, eventlog.SessionFilter{})
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	for _, meta := range all {
		if meta.Status != StatusActive {
			continue
		}
		s, err := m.Get(ctx, meta.ID)
		if err != nil {
			return err
		}
		m.cfg.Logger.Warn("session: closing turn interrupted by agent restart", "session_id", meta.ID)
		s.emit(ctx,
			bridge.ErrorEvent(CodeSubprocessCrashed, "the agent restarted while this turn was running; send a new message to continue", false),
			bridge.TurnCompleteEvent("interrupted"),
			bridge.StatusEvent(pb.AgentStatus_IDLE, ""))
		s.mu.Lock()
		s.meta.Status = StatusIdle
		meta := s.meta
		s.mu.Unlock()
		if err := m.log.PutSession(ctx, meta); err != nil {
			return fmt.Errorf("save session %s: %w", meta.ID, err)
		}
	}
	// Clients attaching once the agent serves see these in the log.
	return m.log.Flush(ctx)
}

// onCommit runs on the event log's writer goroutine after each durable batch.
func (m *Manager) onCommit(evs []eventlog.Event) {
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].SessionID == evs[i].SessionID {
			j++
		}
		m.mu.Lock()
		s := m.sessions[evs[i].SessionID]
		m.mu.Unlock()
		if s != nil {
			s.publishUpTo(evs[j-1].Seq)
		}
		i = j
	}
}

// CreateRequest describes a new session.
type CreateRequest struct {
	// ID, when set, is the new session's id: a UUID no session has (see
	// NewSessionID), so that the caller can announce the session before
	// it exists. Empty: a fresh one.
	ID               string
	WorkingDirectory string
	Model            string
	WorktreeID       string
	AllowedTools     []string
	PlanMode         bool
	Metadata         map[string]string
	// Name is the display name (at most MaxNameRunes characters).
	Name string
	// CreatedBy is the user who asked for the session ("" for local
	// clients).
	CreatedBy string
	// Provider runs the session (UNSPECIFIED: Claude Code). One given
	// explicitly must be registered and able to run here.
	Provider pb.SessionProvider
	// Env is extra environment for the session's provider process.
	Env map[string]string
	// ProviderConfig is provider-specific configuration, checked when the
	// provider starts.
	ProviderConfig map[string]string
	// PermissionMode is a Claude Code permission mode: "" or "default",
	// "acceptEdits" (the CLI's --permission-mode), "plan" (as PlanMode) or
	// "bypassPermissions" (the agent allows every tool call no rule
	// denies, without asking: the CLI's own bypass mode refuses to run as
	// root).
	PermissionMode string
	// MaxTurns bounds the model round trips of each turn (the CLI's
	// --max-turns; 0: no limit). Only providers that can honour it take it
	// (Claude Code, openai-api); others are refused.
	MaxTurns int
}

// applyPermissionMode records req's permission mode in meta.
func applyPermissionMode(req *CreateRequest, meta *eventlog.Session) error {
	switch req.PermissionMode {
	case "", PermissionModeDefault:
	case PermissionModePlan:
		req.PlanMode = true
	case PermissionModeAcceptEdits, PermissionModeBypass:
		meta.Metadata[metaPermissionMode] = req.PermissionMode
	default:
		return invalidf("permission_mode %q is not one of %q, %q, %q, %q", req.PermissionMode,
			PermissionModeDefault, PermissionModeAcceptEdits, PermissionModePlan, PermissionModeBypass)
	}
	return nil
}

// Create makes a new session and announces it with a SessionInfo event. The
// CLI starts with the first message.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Session, error) {
	dir, wt, err := m.resolveWorktree(ctx, req.WorkingDirectory, req.WorktreeID)
	if err != nil {
		return nil, err
	}
	req.WorktreeID = wt
	if dir == "" {
		dir = m.cfg.DefaultDir
	}
	if !filepath.IsAbs(dir) {
		return nil, invalidf("working_directory %q must be an absolute path", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, &DirectoryError{Dir: dir, Err: invalidf("working_directory %q is not an existing directory", dir)}
	}
	name, err := checkName(req.Name)
	if err != nil {
		return nil, err
	}
	model := req.Model
	if model == "" && provider.Default(req.Provider) == pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE {
		// The daemon's --model names a Claude model; other providers use
		// their own default (--codex-model, --openai-model, the ACP agent's).
		model = m.DefaultModel()
	}
	id, err := m.newID(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now()
	meta := eventlog.Session{
		ID: id, Model: model, WorkingDirectory: dir, WorktreeID: req.WorktreeID,
		Status: StatusIdle, CreatedAt: now, UpdatedAt: now, Metadata: map[string]string{},
		Name: name, CreatedBy: req.CreatedBy,
	}
	for k, v := range req.Metadata {
		meta.Metadata[k] = v
	}
	if err := applyPermissionMode(&req, &meta); err != nil {
		return nil, err
	}
	if err := m.applyProvider(ctx, req, &meta); err != nil {
		return nil, err
	}
	if err := applyMaxTurns(req, &meta); err != nil {
		return nil, err
	}
	if len(req.AllowedTools) > 0 {
		meta.Metadata[metaAllowedTools] = joinList(req.AllowedTools)
	}
	if req.PlanMode {
		meta.Metadata[metaPlanMode] = "true"
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	m.mu.Unlock()
	if m.Draining() {
		return nil, ErrDraining
	}
	if err := m.log.PutSession(ctx, meta); err != nil {
		return nil, fmt.Errorf("save new session: %w", err)
	}
	s := newSession(m, meta, 0)
	m.mu.Lock()
	m.sessions[meta.ID] = s
	m.mu.Unlock()
	s.emit(ctx, &pb.AgentEvent{Event: &pb.AgentEvent_SessionInfo{SessionInfo: s.info(false)}})
	return s, nil
}

// newID returns id, checked to be a UUID no session has, or a fresh one.
func (m *Manager) newID(ctx context.Context, id string) (string, error) {
	if id == "" {
		return uuid.NewString(), nil
	}
	if _, err := uuid.Parse(id); err != nil {
		return "", invalidf("session id %q is not a UUID", id)
	}
	if _, err := m.log.GetSession(ctx, id); !errors.Is(err, eventlog.ErrNotFound) {
		if err != nil {
			return "", fmt.Errorf("check session id: %w", err)
		}
		return "", invalidf("session %s already exists", id)
	}
	return id, nil
}

// Get returns a session, loading it from the log when it is not in memory.
func (m *Manager) Get(ctx context.Context, id string) (*Session, error) {
	if id == "" {
		return nil, invalidf("session_id is required")
	}
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s != nil {
		if s.deleted.Load() {
			return nil, ErrNotFound
		}
		return s, nil
	}
	meta, err := m.log.GetSession(ctx, id)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	last, err := m.log.LastSeq(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	s = newSession(m, meta, last)
	if err := s.loadGrants(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.sessions[id]; cur != nil {
		if cur.deleted.Load() {
			return nil, ErrNotFound
		}
		return cur, nil
	}
	if _, gone := m.gone[id]; gone {
		return nil, ErrNotFound // deleted while we read it
	}
	m.sessions[id] = s
	return s, nil
}

// List returns stored sessions, newest first, with live status for loaded ones.
func (m *Manager) List(ctx context.Context, f eventlog.SessionFilter) ([]eventlog.Session, int, error) {
	list, total, err := m.log.ListSessions(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	m.mu.Lock()
	for i := range list {
		if s := m.sessions[list[i].ID]; s != nil {
			list[i] = s.Meta()
		}
	}
	m.mu.Unlock()
	return list, total, nil
}

// Close stops every CLI gracefully, waits for their output to be persisted
// and closes the log.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		s.markStopping()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stopProcess()
		}()
	}
	wg.Wait()
	m.procs.Wait()
	for _, s := range all {
		s.closeSubscribers(ErrClosed)
	}
	m.feed.close(ErrClosed)
	err := m.log.Close()
	// A turn whose end the log did not publish (it failed, or the CLI
	// was not stopped) still gets its span ended, and so exported.
	for _, s := range all {
		s.abandonTurnSpans("interrupted", whyInterrupted)
	}
	return err
}

// SlowConsumer is the error for a client cut off after receiving lastSeq.
func (m *Manager) SlowConsumer(lastSeq uint64) error {
	return &SlowConsumerError{LastSeq: lastSeq, Buffer: m.cfg.SubscriberBuffer}
}

// NewSessionID is exposed for tests that need a syntactically valid id.
func NewSessionID() string { return uuid.NewString() }

// claudeEnv is the extra environment of a CLI: defaults the agent's own
// environment does not override, then the configured variables, then the
// session's own (CreateRequest.Env).
func (m *Manager) claudeEnv(meta eventlog.Session) []string {
	var env []string
	for _, kv := range m.cfg.ClaudeEnvDefaults {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := os.LookupEnv(k); !set {
			env = append(env, kv)
		}
	}
	env = append(env, m.cfg.ClaudeEnv...)
	for _, k := range slices.Sorted(maps.Keys(meta.Metadata)) {
		if name, ok := strings.CutPrefix(k, metaEnvPrefix); ok {
			env = append(env, name+"="+meta.Metadata[k])
		}
	}
	return env
}
