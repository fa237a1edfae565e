package openaiapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// DefaultModel is the model of sessions when neither the session nor the
// provider names one.
const DefaultModel = "gpt-5.5"

// Defaults of the turn loop.
const (
	// defaultIdleTimeout abandons a response stream silent this long.
	defaultIdleTimeout = 5 * time.Minute
	// defaultMaxSteps bounds the model requests of one turn.
	defaultMaxSteps = 100
	// defaultMaxRetries is the SDK's retries of a failed request (429,
	// 5xx, connection errors), honouring retry-after.
	defaultMaxRetries = 2
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

	// Test knobs; zero means the default.
	idleTimeout time.Duration
	maxRetries  int // -1: none
	maxSteps    int
}

var _ provider.Provider = (*Provider)(nil)

// maxSteps is the most model requests of one turn: the session's max
// turns when set, else the provider's (a test knob) or the default.
func maxSteps(sessionMax, providerMax int) int {
	if sessionMax > 0 {
		return sessionMax
	}
	return cmp.Or(providerMax, defaultMaxSteps)
}

// Kind is SESSION_PROVIDER_OPENAI_API.
func (p *Provider) Kind() pb.SessionProvider { return pb.SessionProvider_SESSION_PROVIDER_OPENAI_API }

// Check reports a missing base URL as a *provider.NotConfiguredError.
func (p *Provider) Check(context.Context) error {
	if p.BaseURL == "" {
		return &provider.NotConfiguredError{Kind: p.Kind(), Configure: "set --openai-base-url (BETCODE_OPENAI_BASE_URL) to an OpenAI-compatible Responses API base such as https://api.openai.com/v1, and OPENAI_API_KEY"}
	}
	return nil
}

// Start starts a conversation in opts.Dir, or resumes conversation
// opts.ResumeID from Home. No request is made until the first turn.
func (p *Provider) Start(ctx context.Context, opts provider.Options) (provider.Conversation, error) {
	if err := p.Check(ctx); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	model := cmp.Or(opts.Model, p.Model, DefaultModel)
	hist, err := p.history(opts, model, log)
	if err != nil {
		return nil, err
	}
	wd, err := openWorkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(strings.TrimSuffix(p.BaseURL, "/") + "/"),
		option.WithMaxRetries(p.retries()),
	}
	if p.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(p.APIKey))
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &conversation{
		id:          hist.ID,
		client:      openai.NewClient(reqOpts...),
		model:       model,
		home:        p.Home,
		env:         commandEnv(opts.Env),
		wd:          wd,
		log:         log.With("provider", "openai-api", "conversation", hist.ID),
		retries:     p.retries(),
		idleTimeout: cmp.Or(p.idleTimeout, defaultIdleTimeout),
		maxSteps:    maxSteps(opts.MaxTurns, p.maxSteps),
		out:         newOutQueue(),
		ctx:         cctx,
		stop:        stop,
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		hist:        hist,
		asks:        map[string]chan provider.Answer{},
	}
	// The conversation is resumable from now on, even before its first turn.
	if err := hist.save(p.Home); err != nil {
		_ = wd.close()
		stop()
		return nil, err
	}
	go c.run()
	return c, nil
}

// history loads the conversation to resume, or starts a new one.
func (p *Provider) history(opts provider.Options, model string, log *slog.Logger) (*history, error) {
	if opts.ResumeID == "" {
		return &history{Version: historyVersion, ID: "oai-" + uuid.NewString(), Model: model}, nil
	}
	if p.Home == "" {
		return nil, errors.New("openai-api: cannot resume a conversation: the provider has no Home")
	}
	h, err := loadHistory(p.Home, opts.ResumeID)
	if errors.Is(err, fs.ErrNotExist) {
		// Lost (a wiped data dir): the session goes on without its context.
		log.Warn("openai-api: conversation history not found; starting it afresh", "conversation", opts.ResumeID)
		return &history{Version: historyVersion, ID: opts.ResumeID, Model: model}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("openai-api: resume conversation: %w", err)
	}
	h.Model = model
	return h, nil
}

func (p *Provider) retries() int {
	switch {
	case p.maxRetries < 0:
		return 0
	case p.maxRetries == 0:
		return defaultMaxRetries
	}
	return p.maxRetries
}
