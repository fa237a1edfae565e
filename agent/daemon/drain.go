package daemon

import (
	"context"
	"errors"
	"log/slog"

	"github.com/betcode-dev/betcode/agent/session"
)

// drain is the first phase of the shutdown: mgr refuses new sessions and
// messages (UNAVAILABLE / AGENT_SHUTTING_DOWN) while the running turns go
// on, until they have all completed, cfg.DrainTimeout passed, or
// cfg.SkipDrain was closed (a second signal). Clients stay connected and
// receive their turns' events; a turn still running afterwards is stopped
// with its CLI by mgr.Close like at any shutdown.
func drain(mgr *session.Manager, cfg Config, log *slog.Logger) {
	mgr.Drain()
	n := mgr.RunningTurns()
	if n == 0 {
		return
	}
	if cfg.DrainTimeout <= 0 {
		log.Info("agent: not waiting for running turns (--drain-timeout 0)", "turns", n)
		return
	}
	log.Info("agent draining: waiting for running turns", "turns", n, "timeout", cfg.DrainTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	go func() {
		select {
		case <-cfg.SkipDrain:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := mgr.WaitTurns(ctx)
	switch {
	case err == nil:
		log.Info("agent drained: every running turn completed")
	case errors.Is(err, context.DeadlineExceeded):
		log.Warn("agent: drain timeout; stopping the turns still running", "turns", mgr.RunningTurns(), "timeout", cfg.DrainTimeout)
	default: // cancelled by SkipDrain
		log.Warn("agent: drain cut short by a second signal; stopping the turns still running", "turns", mgr.RunningTurns())
	}
}
