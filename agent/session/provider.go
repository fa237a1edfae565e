package session

import (
	"context"
	"strings"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Metadata keys of a session's provider settings. Claude Code sessions
// (the default) carry no provider key, so sessions stored before providers
// existed read as Claude Code.
const (
	metaProvider             = "betcode.provider"
	metaEnvPrefix            = "betcode.env."
	metaProviderConfigPrefix = "betcode.provider_config."
)

// applyProvider checks req's provider and records it, with the session's
// environment and provider configuration, in meta. A provider named
// explicitly must be able to run here (its Check); the default one is
// checked when it starts, as before providers existed.
func (m *Manager) applyProvider(ctx context.Context, req CreateRequest, meta *eventlog.Session) error {
	kind := provider.Default(req.Provider)
	var p provider.Provider
	var err error
	if req.Provider == pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED {
		p, err = m.cfg.Providers.Lookup(kind)
	} else {
		p, err = m.cfg.Providers.Get(ctx, kind)
	}
	if err != nil {
		return err
	}
	if c, ok := p.(provider.ConfigChecker); ok {
		if err := c.CheckConfig(req.ProviderConfig); err != nil {
			return invalidf("provider_config: %v", err)
		}
	}
	if kind != pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE {
		meta.Metadata[metaProvider] = provider.Name(kind)
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return invalidf("environment variable %q is not a valid name", k)
		}
		meta.Metadata[metaEnvPrefix+k] = v
	}
	for k, v := range req.ProviderConfig {
		meta.Metadata[metaProviderConfigPrefix+k] = v
	}
	return nil
}

// ProviderOf is the provider a stored session runs.
func ProviderOf(meta eventlog.Session) pb.SessionProvider {
	if k, err := provider.Parse(meta.Metadata[metaProvider]); err == nil {
		return provider.Default(k)
	}
	return pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE
}

// providerConfig is the session's provider_config (nil when none).
func providerConfig(meta eventlog.Session) map[string]string {
	var out map[string]string
	for k, v := range meta.Metadata {
		if name, ok := strings.CutPrefix(k, metaProviderConfigPrefix); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = v
		}
	}
	return out
}

// Provider returns the provider the session runs.
func (s *Session) Provider() pb.SessionProvider {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ProviderOf(s.meta)
}

// ProviderConfig returns the session's provider configuration and extra
// environment (copies).
func (s *Session) ProviderConfig() (config, env map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	config, env = providerConfig(s.meta), map[string]string{}
	for k, v := range s.meta.Metadata {
		if name, ok := strings.CutPrefix(k, metaEnvPrefix); ok {
			env[name] = v
		}
	}
	return config, env
}

// Providers returns the registry of the providers sessions can run.
func (m *Manager) Providers() *provider.Registry { return m.cfg.Providers }
