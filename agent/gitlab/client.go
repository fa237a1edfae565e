package gitlab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
	gl "gitlab.com/gitlab-org/api/client-go"
)

// DefaultURL is the GitLab used when none is configured.
const DefaultURL = "https://gitlab.com"

// Config is the GitLab instance and how to call it.
type Config struct {
	// URL of the GitLab instance, e.g. https://gitlab.example.com (default
	// DefaultURL); a path names a GitLab served under a relative URL.
	URL string
	// Token is a personal (or project/group) access token with read_api
	// scope; TokenFile, if set, is a file holding it instead. Empty: only
	// public projects are visible.
	Token, TokenFile string
	// Timeout bounds each RPC's GitLab calls, retries included (default 30s);
	// a shorter client deadline wins.
	Timeout time.Duration
	// MaxRetries is how often a 429 or 502/503/504 answer is retried
	// (default 3; negative: never).
	MaxRetries int
	// MaxRetryWait is the longest Retry-After honoured by waiting; a longer
	// one (or one past the deadline) is returned to the client as
	// RESOURCE_EXHAUSTED with retry_after_ms (default 10s).
	MaxRetryWait time.Duration
	// LogChunk is the most log bytes one GetJobLog answer carries
	// (default DefaultLogChunk).
	LogChunk int
}

func (c *Config) setDefaults() {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	if c.MaxRetryWait <= 0 {
		c.MaxRetryWait = 10 * time.Second
	}
	if c.LogChunk <= 0 {
		c.LogChunk = DefaultLogChunk
	}
}

// Validate checks the URL (http or https, no credentials in it) and that
// at most one of Token and TokenFile is set.
func (c Config) Validate() error {
	c.setDefaults()
	if _, err := baseURL(c.URL); err != nil {
		return err
	}
	if c.Token != "" && c.TokenFile != "" {
		return errors.New("gitlab-token and gitlab-token-file are both set: keep one")
	}
	return nil
}

func baseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("gitlab-url %q: want https://host[/path]", redact(raw))
	}
	if u.User != nil {
		return nil, fmt.Errorf("gitlab-url %q: put the token in gitlab-token, not in the URL", redact(raw))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// token returns the configured token, reading TokenFile.
func (c Config) token() (string, error) {
	if c.TokenFile == "" {
		return strings.TrimSpace(c.Token), nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read gitlab-token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// newClient builds the GitLab client with BetCode's retry policy.
func newClient(cfg Config, base *url.URL, token string, hc *http.Client) (*gl.Client, error) {
	opts := []gl.ClientOptionFunc{
		gl.WithBaseURL(base.String()),
		gl.WithCustomRetry(retryPolicy(cfg.MaxRetryWait)),
		gl.WithCustomBackoff(backoff),
		gl.WithCustomRetryMax(max(cfg.MaxRetries, 0)),
		gl.WithUserAgent("betcode-agent"),
	}
	if hc != nil {
		opts = append(opts, gl.WithHTTPClient(hc))
	}
	var c *gl.Client
	var err error
	if token == "" {
		c, err = gl.NewAuthSourceClient(gl.Unauthenticated{}, opts...)
	} else {
		c, err = gl.NewClient(token, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("gitlab client for %s: %w", base, err)
	}
	return c, nil
}

// retryPolicy retries 429 (when its Retry-After is at most maxWait and
// ends before the deadline) and 502/503/504; never transport errors, which
// are answered at once as UNAVAILABLE.
func retryPolicy(maxWait time.Duration) retryablehttp.CheckRetry {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil || resp == nil {
			return false, nil
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			wait := retryAfter(resp.Header, time.Now())
			if wait > maxWait {
				return false, nil
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return false, nil
			}
			return true, nil
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true, nil
		}
		return false, nil
	}
}

// backoff waits as a 429's Retry-After says, else 200ms doubling to 2s,
// with up to 10% jitter.
func backoff(_, _ time.Duration, attempt int, resp *http.Response) time.Duration {
	var d time.Duration
	if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		d = retryAfter(resp.Header, time.Now())
	} else {
		d = min(200*time.Millisecond<<min(attempt, 4), 2*time.Second)
	}
	return d + time.Duration(rand.Int64N(int64(d/10)+1))
}

// defaultRetryAfter is assumed when a 429 carries no usable Retry-After.
const defaultRetryAfter = time.Second

// retryAfter reads Retry-After (seconds or an HTTP date), else
// RateLimit-Reset (a Unix time), else defaultRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return time.Duration(min(n, 86400)) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if v := h.Get("RateLimit-Reset"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			return min(max(time.Unix(n, 0).Sub(now), 0), 24*time.Hour)
		}
	}
	return defaultRetryAfter
}
