package configsvc

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// ApplyFunc makes the changed keys (all hot) take effect in the running
// agent; values holds every key's value in effect, including the changes.
type ApplyFunc func(values map[string]any, changed []string) error

// GrantsFunc returns a session's ALLOW_SESSION grants as rules.
type GrantsFunc func(ctx context.Context, sessionID string) ([]string, error)

// Options configure a Service.
type Options struct {
	// Home is the user's home, whose ~/.claude.json and ~/.claude hold
	// Claude Code's configuration (required).
	Home   string
	Apply  ApplyFunc  // required
	Grants GrantsFunc // nil: sessions have no grants
	Logger *slog.Logger
}

// Service implements pb.ConfigServiceServer.
type Service struct {
	pb.UnimplementedConfigServiceServer
	opts Options

	mu       sync.Mutex // serialises UpdateSettings; guards the fields below
	file     string
	stored   map[string]any
	settings map[string]config.Setting
	pending  map[string]bool // a stored value waits for a restart
}

var _ pb.ConfigServiceServer = (*Service)(nil)

// New returns a Service for an agent started with snap.
func New(snap config.Snapshot, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{
		opts: opts, file: snap.File,
		stored: maps.Clone(snap.Stored), settings: maps.Clone(snap.Settings), pending: map[string]bool{},
	}
	if s.stored == nil {
		s.stored = map[string]any{}
	}
	if s.settings == nil {
		s.settings = map[string]config.Setting{}
	}
	for _, k := range config.Keys {
		if _, ok := s.settings[k.Name]; !ok {
			s.settings[k.Name] = config.Setting{Value: k.DefaultValue(), Source: config.SourceDefault}
		}
	}
	return s
}

// GetSettings returns the agent's settings (scope unspecified or user), or
// a project's Claude Code settings file (project, local).
func (s *Service) GetSettings(_ context.Context, req *pb.GetSettingsRequest) (*pb.Settings, error) {
	switch req.Scope {
	case pb.ConfigScope_CONFIG_SCOPE_UNSPECIFIED, pb.ConfigScope_CONFIG_SCOPE_USER:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.agentSettings()
	case pb.ConfigScope_CONFIG_SCOPE_PROJECT, pb.ConfigScope_CONFIG_SCOPE_LOCAL:
		return s.claudeSettings(req.Scope, req.WorkingDirectory)
	}
	return nil, invalid("scope", "unknown scope "+req.Scope.String())
}

// UpdateSettings validates every named key, stores them in the settings
// file and applies the hot ones.
func (s *Service) UpdateSettings(_ context.Context, req *pb.UpdateSettingsRequest) (*pb.Settings, error) {
	if req.Scope != pb.ConfigScope_CONFIG_SCOPE_USER {
		return nil, invalid("scope", "only CONFIG_SCOPE_USER (the agent's settings) can be written; Claude Code's project files are edited in the project")
	}
	if len(req.GetUpdateMask().GetPaths()) == 0 {
		return nil, invalid("update_mask", "name the settings to change")
	}
	changes, err := changesOf(req.Settings, req.UpdateMask.Paths)
	if err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	stored := maps.Clone(s.stored)
	maps.Copy(stored, changes)
	if err := config.WriteFile(s.file, stored); err != nil {
		s.opts.Logger.Error("config: storing settings", "err", err)
		return nil, server.Status(codes.Internal, server.CodeInternal, "store the settings: "+err.Error())
	}
	s.stored = stored

	values := make(map[string]any, len(s.settings))
	for k, st := range s.settings {
		values[k] = st.Value
	}
	var hot, restart, overridden []string
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		v := changes[k]
		cur := s.settings[k]
		key, _ := config.Lookup(k)
		switch {
		case cur.Source.Overrides():
			overridden = append(overridden, k)
			s.pending[k] = false
		case same(v, cur.Value):
			s.settings[k] = config.Setting{Value: v, Source: config.SourceSettingsFile}
			s.pending[k] = false
		case key.Hot:
			values[k] = v
			hot = append(hot, k)
		default:
			restart = append(restart, k)
			s.pending[k] = true
		}
	}
	if len(hot) > 0 {
		if err := s.opts.Apply(values, hot); err != nil {
			s.opts.Logger.Error("config: applying settings", "keys", hot, "err", err)
			return nil, server.Status(codes.Internal, server.CodeInternal, "stored, but applying failed (a restart applies them): "+err.Error())
		}
		for _, k := range hot {
			s.settings[k] = config.Setting{Value: values[k], Source: config.SourceSettingsFile}
			s.pending[k] = false
		}
	}
	s.opts.Logger.Info("config: settings updated", "applied", hot, "restart_required", restart, "overridden", overridden)
	out, err := s.agentSettings()
	if err != nil {
		return nil, err
	}
	out.RestartRequired, out.Overridden = restart, overridden
	return out, nil
}

// agentSettings renders the settings in effect; s.mu is held.
func (s *Service) agentSettings() (*pb.Settings, error) {
	get := func(k string) any { return s.settings[k].Value }
	extra := make(map[string]any, len(config.Keys))
	out := &pb.Settings{
		DefaultModel:          get("model").(string),
		MaxConcurrentSessions: uint32(max(get("max-processes").(int), 0)),
		AutoCompactThreshold:  get("auto-compact-tokens").(uint64),
		Permissions: &pb.PermissionRules{
			Allow: get("allow").([]string), Deny: get("deny").([]string), Ask: get("ask").([]string),
		},
	}
	for _, k := range config.Keys {
		st := s.settings[k.Name]
		j := masked(k, config.JSON(st.Value))
		extra[k.Name] = j
		pv, err := structpb.NewValue(j)
		if err != nil {
			return nil, server.Status(codes.Internal, server.CodeInternal, "render "+k.Name+": "+err.Error())
		}
		out.Values = append(out.Values, &pb.SettingValue{
			Key: k.Name, Value: pv, Source: pb.SettingSource(st.Source), Hot: k.Hot,
			RestartPending: s.pending[k.Name], Env: k.Env(),
		})
	}
	var err error
	if out.Extra, err = structpb.NewStruct(extra); err != nil {
		return nil, server.Status(codes.Internal, server.CodeInternal, "render settings: "+err.Error())
	}
	return out, nil
}

// same reports whether two values of a key are equal; an empty list is
// no list.
func same(a, b any) bool {
	if la, ok := a.([]string); ok {
		lb, _ := b.([]string)
		return slices.Equal(la, lb)
	}
	return reflect.DeepEqual(a, b)
}

// invalid is the INVALID_ARGUMENT answer about one key.
func invalid(key, msg string) error {
	return server.StatusWith(codes.InvalidArgument, server.CodeInvalidArgument, key+": "+msg, map[string]string{"key": key})
}

func invalidKey(err error) error {
	if ke, ok := errors.AsType[*config.KeyError](err); ok {
		return invalid(ke.Key, ke.Err.Error())
	}
	return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, err.Error())
}
