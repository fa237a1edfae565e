package subagent

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// saveTimeout bounds one write of a record.
const saveTimeout = 10 * time.Second

// save stores sa's record, unless the agent's shutdown ended it. Saves of
// one subagent happen in the order of its changes.
func (s *Service) save(sa *subagent) {
	sa.saveMu.Lock()
	defer sa.saveMu.Unlock()
	sa.mu.Lock()
	interrupted := sa.interrupted
	sa.mu.Unlock()
	if interrupted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := s.store.putSubagent(ctx, sa.proto()); err != nil {
		s.opt.Logger.Warn("subagent: saving the subagent", "subagent_id", sa.id, "err", err)
	}
}

// saveOrchestration stores an orchestration's snapshot (its persist hook).
func (s *Service) saveOrchestration(v *pb.Orchestration) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := s.store.putOrchestration(ctx, v); err != nil {
		s.opt.Logger.Warn("subagent: saving the orchestration", "orchestration_id", v.GetId(), "err", err)
	}
}

// restore loads the records of earlier runs of the agent. Those that were
// not terminal were running when it stopped: they are FAILED now, with
// errInterrupted, and saved so. A record that cannot be read is logged and
// left out: the service starts without it.
func (s *Service) restore(ctx context.Context) {
	subs, orchs, err := s.store.load(ctx)
	if err != nil {
		s.opt.Logger.Error("subagent: reading the stored subagents and orchestrations; starting without them", "err", err)
		return
	}
	now := timestamppb.New(s.opt.Now())
	ended := map[string]*pb.Subagent{}
	interrupted := 0
	for _, v := range subs {
		if interruptSubagent(v, now) {
			interrupted++
			if err := s.store.putSubagent(ctx, v); err != nil {
				s.opt.Logger.Warn("subagent: saving an interrupted subagent", "subagent_id", v.GetId(), "err", err)
			}
			s.markSession(ctx, v)
		}
		ended[v.GetId()] = v
		sa := restoreSubagent(v, s.opt.Now)
		s.subagents[sa.id] = sa
		s.order = append(s.order, sa)
	}
	for _, v := range orchs {
		if interruptOrchestration(v, ended, now) {
			interrupted++
			if err := s.store.putOrchestration(ctx, v); err != nil {
				s.opt.Logger.Warn("subagent: saving an interrupted orchestration", "orchestration_id", v.GetId(), "err", err)
			}
		}
		o, err := restoreOrchestration(v, s.opt.Now)
		if err != nil {
			s.opt.Logger.Warn("subagent: leaving out a stored orchestration", "err", err)
			continue
		}
		s.orchs[o.id] = o
		s.orchOrder = append(s.orchOrder, o)
	}
	if len(subs)+len(orchs) > 0 {
		s.opt.Logger.Info("subagent: restored", "subagents", len(subs), "orchestrations", len(s.orchOrder), "interrupted", interrupted)
	}
}

// markSession records an interrupted subagent's end in its session's
// metadata, as end does.
func (s *Service) markSession(ctx context.Context, v *pb.Subagent) {
	if s.m == nil || v.GetSessionId() == "" {
		return
	}
	sess, err := s.m.Get(ctx, v.GetSessionId())
	if err == nil {
		err = sess.SetMetadata(ctx, map[string]string{MetaStatus: statusWord(v.GetStatus()), MetaError: v.GetError()})
	}
	if err != nil {
		s.opt.Logger.Warn("subagent: marking an interrupted subagent's session", "subagent_id", v.GetId(), "session_id", v.GetSessionId(), "err", err)
	}
}
