package server

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/internal/wirecodec"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// rawEvent receives an AgentEvent as the bytes on the wire (captureCodec).
type rawEvent struct{ b []byte }

// captureCodec is a client codec that keeps a received message's bytes
// when asked for a *rawEvent, and is the proto codec otherwise.
type captureCodec struct{ encoding.CodecV2 }

func (c captureCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawEvent); ok {
		r.b = data.Materialize()
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// openStream opens a stream of sessionID's events after from, receiving
// with captureCodec.
type openStream func(ctx context.Context, c pb.AgentServiceClient, sessionID string, from uint64, opt grpc.CallOption) (grpc.ClientStream, error)

func openConverse(ctx context.Context, c pb.AgentServiceClient, sessionID string, from uint64, opt grpc.CallOption) (grpc.ClientStream, error) {
	st, err := c.Converse(ctx, opt)
	if err != nil {
		return nil, err
	}
	start := &pb.StartConversation{SessionId: sessionID, Metadata: map[string]string{"from_sequence": strconv.FormatUint(from, 10)}}
	return st, st.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: start}})
}

func openResume(ctx context.Context, c pb.AgentServiceClient, sessionID string, from uint64, opt grpc.CallOption) (grpc.ClientStream, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, MDFollow, "true")
	return c.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: sessionID, FromSequence: from}, opt)
}

// startTestAgent starts an agent on the fake CLI, stopped when the test
// ends, and a gRPC client of it.
func startTestAgent(t *testing.T) (*benchAgent, pb.AgentServiceClient) {
	t.Helper()
	a, err := startBenchAgent(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	conn, err := dial(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return a, pb.NewAgentServiceClient(conn)
}

// Clients attached to one session receive, over gRPC, exactly the bytes
// the session logged for each event, in sequence order: live events as the
// pre-encoded bytes shared by every stream (wirecodec), the replayed one
// marshaled by gRPC.
func TestStreamsSendLoggedBytes(t *testing.T) {
	if !wirecodec.Active() {
		t.Fatal("the server's proto codec is not wirecodec's")
	}
	a, client := startTestAgent(t)
	capture := grpc.ForceCodecV2(captureCodec{encoding.GetCodecV2(grpcproto.Name)})

	tests := []struct {
		name    string
		clients int
		open    openStream
	}{
		{"Converse, one client", 1, openConverse},
		{"Converse, three clients", 3, openConverse},
		{"ResumeSession following, two clients", 2, openResume},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := a.mgr.Create(ctx, session.CreateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if err := runTurn(ctx, s, "FLOOD 0"); err != nil {
				t.Fatal(err)
			}
			// Each client replays the last event: once it has it, its
			// stream is subscribed to live events.
			first := s.LastSeq()
			streams := make([]grpc.ClientStream, tt.clients)
			got := make([][][]byte, tt.clients)
			for i := range streams {
				st, err := tt.open(ctx, client, s.ID(), first-1, capture)
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = st
				got[i] = recvUntil(t, st, first)
			}
			if err := runTurn(ctx, s, "FLOOD 20"); err != nil {
				t.Fatal(err)
			}
			last := s.LastSeq()
			for i, st := range streams {
				got[i] = append(got[i], recvUntil(t, st, last)...)
			}

			logged := map[uint64][]byte{}
			err = a.mgr.Log().Since(ctx, s.ID(), first-1, func(e eventlog.Event) error {
				logged[e.Seq] = bytes.Clone(e.Payload)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(logged) != int(last-first+1) {
				t.Fatalf("log has %d events after %d, want %d", len(logged), first-1, last-first+1)
			}
			for i, frames := range got {
				if len(frames) != len(logged) {
					t.Fatalf("client %d received %d events, want %d", i, len(frames), len(logged))
				}
				for j, b := range frames {
					seq := first + uint64(j)
					if !bytes.Equal(b, logged[seq]) {
						t.Errorf("client %d: event %d is %x on the wire, %x in the log", i, seq, b, logged[seq])
					}
				}
			}
		})
	}
}

// recvUntil receives events from st up to the one with sequence last, and
// returns their wire bytes; the sequences must follow each other.
func recvUntil(t *testing.T, st grpc.ClientStream, last uint64) [][]byte {
	t.Helper()
	var out [][]byte
	var prev uint64
	for {
		var raw rawEvent
		if err := st.RecvMsg(&raw); err != nil {
			t.Fatalf("receive (after sequence %d): %v", prev, err)
		}
		var ev pb.AgentEvent
		if err := proto.Unmarshal(raw.b, &ev); err != nil {
			t.Fatal(err)
		}
		if prev != 0 && ev.Sequence != prev+1 {
			t.Fatalf("event %d after %d", ev.Sequence, prev)
		}
		prev = ev.Sequence
		out = append(out, raw.b)
		if ev.Sequence >= last {
			return out
		}
	}
}
