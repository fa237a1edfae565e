package openaiapi

import (
	"context"
	"errors"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Provider runs sessions with provider openai-api.
type Provider struct {
	// BaseURL is the Responses API base, e.g. https://api.openai.com/v1;
	// "" leaves the provider unconfigured.
	BaseURL string
	// APIKey is sent as the bearer token; "" sends none (local servers).
	APIKey string
	// Model is the default model of its sessions.
	Model string
	// Home is a directory the provider may keep its conversations in
	// (<Home>/<session id>…), so that a restarted agent resumes them.
	Home string
}

var _ provider.Provider = (*Provider)(nil)

// Kind is SESSION_PROVIDER_OPENAI_API.
func (p *Provider) Kind() pb.SessionProvider { return pb.SessionProvider_SESSION_PROVIDER_OPENAI_API }

// Check reports a missing base URL as a *provider.NotConfiguredError.
func (p *Provider) Check(context.Context) error {
	if p.BaseURL == "" {
		return &provider.NotConfiguredError{Kind: p.Kind(), Configure: "set --openai-base-url (BETCODE_OPENAI_BASE_URL) to an OpenAI-compatible Responses API base such as https://api.openai.com/v1, and OPENAI_API_KEY"}
	}
	return nil
}

// Start starts a conversation.
func (p *Provider) Start(ctx context.Context, opts provider.Options) (provider.Conversation, error) {
	return nil, errors.New("openaiapi: not implemented")
}
