package push

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/registry"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/openprompts"
	"github.com/betcode-dev/betcode/shared/tunnel"
)

// clientVersion is what the watcher tells the agent it speaks: the
// release that added WatchSessions.
const clientVersion = "0.4.0"

// watcher is the watch of one tunnel.
type watcher struct {
	client *tunnel.Client
	cancel context.CancelFunc
}

// WatchTunnel starts watching t's machine for as long as t's tunnel lives
// (or until Close), and returns at once. Calling it again for the same
// tunnel does nothing; for a newer tunnel of the machine it stops the
// older tunnel's watch. It does nothing when push is disabled.
//
// Wire it into the tunnel service's OnOnline, which runs when a tunnel
// comes up (and again on heartbeats with buffered messages).
func (s *Service) WatchTunnel(t *registry.Tunnel) {
	if s.key.Public == "" || t == nil || t.Client == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	old := s.watching[t.MachineID]
	if old != nil && old.client == t.Client {
		return
	}
	if old != nil {
		old.cancel()
	}
	ctx, cancel := context.WithCancel(s.ctx)
	w := &watcher{client: t.Client, cancel: cancel}
	s.watching[t.MachineID] = w
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			if s.watching[t.MachineID] == w {
				delete(s.watching, t.MachineID)
			}
			s.mu.Unlock()
			if s.unwatched != nil {
				s.unwatched(t.MachineID)
			}
		}()
		var tunnelEnd sync.WaitGroup
		defer tunnelEnd.Wait()
		defer cancel()
		tunnelEnd.Go(func() {
			select {
			case <-t.Client.Done():
				cancel()
			case <-ctx.Done():
			}
		})
		s.watchTunnel(ctx, t)
		// An agent that cannot be watched stays recorded until its tunnel
		// ends, so that OnOnline's later calls do not try again.
		<-ctx.Done()
	})
}

// watchTunnel runs Watch over t's tunnel until ctx ends or the agent
// cannot be watched.
func (s *Service) watchTunnel(ctx context.Context, t *registry.Tunnel) {
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()
	conn, err := dialTunnel(t.Client)
	if err != nil {
		s.opt.Log.Warn("push: watch a machine's sessions", "machine_id", t.MachineID, "err", err)
		return
	}
	defer conn.Close()
	if err := s.Watch(ctx, t.MachineID, conn); err != nil && ctx.Err() == nil {
		s.opt.Log.Warn("push: stopped watching a machine's sessions", "machine_id", t.MachineID, "err", err)
	}
}

// Watch follows machineID's sessions with WatchSessions over conn until ctx
// ends or the agent answers UNIMPLEMENTED (an agent older than 0.4.0) or
// PERMISSION_DENIED (a machine with --relay-e2e=required), reconnecting
// with backoff when the stream breaks, and queues a notification for every
// prompt that starts waiting and every turn that ends. It returns nil when the agent cannot be watched, else ctx's error.
//
// The prompts already waiting when a stream starts (the snapshot) are
// notified too: the store's claims make sure each is sent once however
// often the watch restarts, on this replica or another.
func (s *Service) Watch(ctx context.Context, machineID string, conn grpc.ClientConnInterface) error {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(s.opt.WatchRetryMin),
		backoff.WithMaxInterval(s.opt.WatchRetryMax),
		backoff.WithMaxElapsedTime(0),
	)
	client := pb.NewAgentServiceClient(conn)
	open := openprompts.Set[event]{}
	for {
		err := s.watchOnce(ctx, machineID, client, b.Reset, open)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch status.Code(err) {
		case codes.Unimplemented:
			s.opt.Log.Info("push: the machine's agent has no WatchSessions (older than 0.4.0): no notifications from it", "machine_id", machineID)
			return nil
		case codes.PermissionDenied:
			// --relay-e2e=required: the relay reads nothing of the machine.
			s.opt.Log.Info("push: the machine serves the relay only end-to-end channels: no notifications through the relay", "machine_id", machineID)
			return nil
		}
		wait := b.NextBackOff()
		s.opt.Log.Debug("push: session watch ended, retrying", "machine_id", machineID, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watchOnce runs one WatchSessions stream until it ends; connected is
// called once the snapshot is complete. open holds the prompts notified
// and not yet resolved, across the streams of one Watch.
func (s *Service) watchOnce(ctx context.Context, machineID string, client pb.AgentServiceClient, connected func(), open openprompts.Set[event]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-betcode-client-version", clientVersion)
	stream, err := client.WatchSessions(ctx, &pb.WatchSessionsRequest{})
	if err != nil {
		return err
	}
	// failed[session] is the last turn end notified as failed by a fatal
	// error, so that the turn_complete with an error stop reason that
	// follows it is not notified twice.
	failed := map[string]bool{}
	// The snapshot's sessions: a prompt notified earlier whose session it
	// no longer lists was resolved while no stream was open.
	snapshot := map[string]bool{}
	for {
		u, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the agent ended WatchSessions")
		}
		if err != nil {
			return err
		}
		if u.GetSnapshotDone() {
			s.withdraw(machineID, open.Unlisted(snapshot))
			snapshot = nil
			connected()
			continue
		}
		if snapshot != nil && u.GetSession() != nil {
			snapshot[u.GetSession().GetId()] = true
		}
		s.update(machineID, u, failed, open)
	}
}

// update queues the notifications u calls for, the withdrawal of the
// prompts it shows resolved included.
func (s *Service) update(machineID string, u *pb.SessionUpdate, failed map[string]bool, open openprompts.Set[event]) {
	sess := u.GetSession()
	if sess == nil {
		return
	}
	defer func() { s.withdraw(machineID, open.Gone(u)) }()
	if u.GetDeleted() {
		delete(failed, sess.GetId())
		return
	}
	cause := u.GetCause()
	if cause == nil {
		// A snapshot entry (or a rename): its waiting prompts, which this
		// watch may not have seen start. Claims dedupe the ones already
		// sent; prompts older than the claims' retention are left alone.
		horizon := s.opt.Now().Add(-s.opt.Retention)
		for _, ev := range u.GetPending() {
			if ts := ev.GetTimestamp(); ts != nil && ts.AsTime().Before(horizon) {
				continue
			}
			if e, ok := promptEvent(machineID, sess, ev); ok {
				open.Add(e.n.SessionID, e.n.RequestID, e)
				s.notify(machineID, e)
			}
		}
		return
	}
	if e, ok := promptEvent(machineID, sess, cause); ok {
		open.Add(e.n.SessionID, e.n.RequestID, e)
		s.notify(machineID, e)
		return
	}
	e, ok := turnEvent(machineID, sess, cause)
	if !ok {
		return
	}
	id := sess.GetId()
	if e.n.Type == KindTurnFailed {
		if cause.GetTurnComplete() != nil && failed[id] {
			delete(failed, id)
			return
		}
		failed[id] = cause.GetError() != nil
	} else {
		delete(failed, id)
	}
	s.notify(machineID, e)
}
