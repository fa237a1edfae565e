package session

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/bridge"
	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// received is one event a StreamEncoded sender got.
type received struct {
	ev   *pb.AgentEvent // a copy: replayed events reuse one message
	wire []byte
}

// Every subscriber gets each live event with its wire encoding: the very
// bytes the session wrote to the log (one marshal, one buffer shared by all
// subscribers), which decode to the event handed with them, in sequence
// order. Replayed events come without one.
func TestStreamEncodedSharesLoggedBytes(t *testing.T) {
	errEnough := errors.New("enough")
	tests := []struct {
		name        string
		subscribers int
		events      func() []*pb.AgentEvent
	}{
		{"one subscriber, one event", 1, func() []*pb.AgentEvent {
			return []*pb.AgentEvent{bridge.StatusEvent(pb.AgentStatus_THINKING, "")}
		}},
		{"three subscribers, a turn's events", 3, func() []*pb.AgentEvent {
			return []*pb.AgentEvent{
				bridge.StatusEvent(pb.AgentStatus_THINKING, ""),
				{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: "héllo"}}},
				{Event: &pb.AgentEvent_TextDelta{TextDelta: &pb.TextDelta{Text: " world", IsComplete: true}}},
				bridge.ErrorEvent("SOME_CODE", "something failed", false),
				bridge.TurnCompleteEvent("end_turn"),
				bridge.StatusEvent(pb.AgentStatus_IDLE, ""),
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, Config{DefaultDir: t.TempDir()})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := m.Create(ctx, CreateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			// One committed event to replay: a subscriber that received
			// it is registered for live events.
			s.emit(ctx, bridge.StatusEvent(pb.AgentStatus_IDLE, "ready"))
			if err := s.Stream(ctx, StreamOptions{From: s.LastSeq(), UntilIdle: true}, func(*pb.AgentEvent) error { return nil }); err != nil {
				t.Fatal(err)
			}
			first := s.LastSeq()
			evs := tt.events()
			last := first + uint64(len(evs))

			ready := make(chan struct{}, tt.subscribers)
			results := make([]chan []received, tt.subscribers)
			for i := range results {
				results[i] = make(chan []received, 1)
				go func() {
					var got []received
					err := s.StreamEncoded(ctx, StreamOptions{From: first - 1}, func(ev *pb.AgentEvent, wire *wirecodec.Wire) error {
						got = append(got, received{ev: proto.CloneOf(ev), wire: wire.Bytes()})
						if ev.Sequence == first {
							ready <- struct{}{}
						}
						if ev.Sequence == last {
							return errEnough
						}
						return nil
					})
					if !errors.Is(err, errEnough) {
						t.Errorf("StreamEncoded: %v", err)
					}
					results[i] <- got
				}()
			}
			for range tt.subscribers {
				select {
				case <-ready:
				case <-ctx.Done():
					t.Fatal("subscribers did not replay the first event")
				}
			}
			s.emit(ctx, evs...)

			logged := map[uint64][]byte{}
			var shared map[uint64][]byte // the first subscriber's wires
			for i, res := range results {
				got := <-res
				if len(got) != 1+len(evs) {
					t.Fatalf("subscriber %d got %d events, want %d", i, len(got), 1+len(evs))
				}
				if got[0].ev.Sequence != first || got[0].wire != nil {
					t.Errorf("subscriber %d: replayed event %d with wire %x, want %d without", i, got[0].ev.Sequence, got[0].wire, first)
				}
				if i == 0 {
					logged = loggedPayloads(t, m.Log(), s.ID(), first)
					shared = map[uint64][]byte{}
				}
				for j, r := range got[1:] {
					seq := first + 1 + uint64(j)
					if r.ev.Sequence != seq {
						t.Fatalf("subscriber %d: event %d has sequence %d, want %d", i, j, r.ev.Sequence, seq)
					}
					if !bytes.Equal(r.wire, logged[seq]) {
						t.Errorf("subscriber %d: event %d wire %x, log %x", i, seq, r.wire, logged[seq])
					}
					var dec pb.AgentEvent
					if err := proto.Unmarshal(r.wire, &dec); err != nil || !proto.Equal(&dec, r.ev) {
						t.Errorf("subscriber %d: event %d wire decodes to %v (%v), want %v", i, seq, &dec, err, r.ev)
					}
					if !proto.Equal(r.ev, evs[j]) {
						t.Errorf("subscriber %d: event %d is %v, want the emitted %v", i, seq, r.ev, evs[j])
					}
					if i == 0 {
						shared[seq] = r.wire
					} else if unsafe.SliceData(r.wire) != unsafe.SliceData(shared[seq]) {
						t.Errorf("subscriber %d: event %d was marshaled again, not shared", i, seq)
					}
				}
			}
		})
	}
}

// loggedPayloads returns the log's payloads of sessionID after seq.
func loggedPayloads(t *testing.T, log *eventlog.Log, sessionID string, after uint64) map[uint64][]byte {
	t.Helper()
	out := map[uint64][]byte{}
	err := log.Since(context.Background(), sessionID, after, func(e eventlog.Event) error {
		out[e.Seq] = bytes.Clone(e.Payload)
		return nil
	})
	if err != nil {
		t.Fatalf("read the log: %v", err)
	}
	return out
}
