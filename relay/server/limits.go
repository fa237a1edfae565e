package server

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/betcode-dev/betcode/relay/auth"
	"github.com/betcode-dev/betcode/relay/limits"
	"github.com/betcode-dev/betcode/relay/store"
)

// callLimits applies the relay's limits.Limiter to clients' calls: the call
// rate per token (per address for calls without one, i.e. enrolling) and
// the concurrent calls per token and per tunnel.
type callLimits struct {
	lim     *limits.Limiter
	audit   func(store.AuditEvent)
	refused *prometheus.CounterVec // by limit: rate, streams

	mu      sync.Mutex
	audited map[string]time.Time // key -> last rate_limited audit event
}

// rateAuditEvery bounds the audit events of one over-eager token.
const rateAuditEvery = time.Minute

func newCallLimits(lim *limits.Limiter, audit func(store.AuditEvent), reg prometheus.Registerer) *callLimits {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "betcode_relay_limited_calls_total",
		Help: "Client calls refused by a limit: the per-token call rate (rate) or the concurrent calls per token or tunnel (streams).",
	}, []string{"limit"})
	reg.MustRegister(refused)
	return &callLimits{lim: lim, audit: audit, refused: refused, audited: map[string]time.Time{}}
}

// allow implements auth.Options.Limit.
func (c *callLimits) allow(w http.ResponseWriter, r *http.Request, id auth.Identity) bool {
	key := id.TokenID
	if key == "" {
		host, _, err := net.SplitHostPort(id.Remote)
		if err != nil {
			host = id.Remote
		}
		key = "addr:" + host
	}
	ok, wait := c.lim.Allow(key)
	if ok {
		return true
	}
	c.refused.WithLabelValues("rate").Inc()
	c.mu.Lock()
	due := time.Since(c.audited[key]) >= rateAuditEvery
	if due {
		if len(c.audited) > 10000 {
			c.audited = map[string]time.Time{}
		}
		c.audited[key] = time.Now()
	}
	c.mu.Unlock()
	if due {
		c.audit(store.AuditEvent{Actor: id.UserID, Action: "rate_limited", Target: r.URL.Path, Remote: id.Remote, Outcome: "denied",
			Detail: "over the per-token call rate; retry after " + wait.Round(time.Millisecond).String() + " (further refusals this minute not recorded)"})
	}
	limits.WriteRateLimited(w, r, wait)
	return false
}

// AcquireStream implements router.StreamLimiter. Calls forwarded by another
// replica (which counted them against their token) count per user here.
func (c *callLimits) AcquireStream(w http.ResponseWriter, r *http.Request, tokenID, machineID string) (func(), bool) {
	key := tokenID
	if key == "" {
		key = "user:" + auth.UserID(r.Context())
	}
	release, err := c.lim.AcquireStream(key, machineID)
	if err != nil {
		c.refused.WithLabelValues("streams").Inc()
		limits.WriteExhausted(w, limits.CodeTooManyStreams, err.Error())
		return nil, false
	}
	return release, true
}
