package subagent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// KV is the subset of the event log (eventlog.Log) the service keeps its
// records in, so that subagents and orchestrations survive a restart.
type KV interface {
	PutKV(ctx context.Context, scope, key string, value []byte) error
	GetKV(ctx context.Context, scope, prefix string) (map[string][]byte, error)
}

// Keys of the records in the agent-wide scope ("") of the key/value table:
// a Subagent or an Orchestration message, in protobuf's binary encoding,
// rewritten on every change.
const (
	kvScope          = ""
	keySubagent      = "subagent/sa/"
	keyOrchestration = "subagent/orch/"
)

// errInterrupted is the error of a subagent or step that was running when
// the agent stopped.
const errInterrupted = "interrupted by an agent restart"

// store reads and writes the records. A nil kv keeps nothing.
type store struct{ kv KV }

func (st store) putSubagent(ctx context.Context, v *pb.Subagent) error {
	return st.put(ctx, keySubagent+v.GetId(), v)
}

func (st store) putOrchestration(ctx context.Context, v *pb.Orchestration) error {
	return st.put(ctx, keyOrchestration+v.GetId(), v)
}

func (st store) put(ctx context.Context, key string, m proto.Message) error {
	if st.kv == nil {
		return nil
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := st.kv.PutKV(ctx, kvScope, key, b); err != nil {
		return fmt.Errorf("save %s: %w", key, err)
	}
	return nil
}

// load returns the stored subagents and orchestrations, oldest first.
func (st store) load(ctx context.Context) ([]*pb.Subagent, []*pb.Orchestration, error) {
	if st.kv == nil {
		return nil, nil, nil
	}
	subs, err := loadAll[pb.Subagent](ctx, st.kv, keySubagent)
	if err != nil {
		return nil, nil, err
	}
	orchs, err := loadAll[pb.Orchestration](ctx, st.kv, keyOrchestration)
	if err != nil {
		return nil, nil, err
	}
	slices.SortStableFunc(subs, func(a, b *pb.Subagent) int {
		return cmp.Or(a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime()), strings.Compare(a.GetId(), b.GetId()))
	})
	slices.SortStableFunc(orchs, func(a, b *pb.Orchestration) int {
		return cmp.Or(a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime()), strings.Compare(a.GetId(), b.GetId()))
	})
	return subs, orchs, nil
}

func loadAll[T any, P interface {
	*T
	proto.Message
}](ctx context.Context, kv KV, prefix string) ([]P, error) {
	recs, err := kv.GetKV(ctx, kvScope, prefix)
	if err != nil {
		return nil, fmt.Errorf("read %s records: %w", strings.TrimSuffix(prefix, "/"), err)
	}
	out := make([]P, 0, len(recs))
	for k, b := range recs {
		v := P(new(T))
		if err := proto.Unmarshal(b, v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", k, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// interruptSubagent marks a subagent that was not terminal when the agent
// stopped FAILED; it reports whether it changed v.
func interruptSubagent(v *pb.Subagent, now *timestamppb.Timestamp) bool {
	if terminal(v.GetStatus()) {
		return false
	}
	v.Status = pb.SubagentStatus_SUBAGENT_STATUS_FAILED
	v.Error = errInterrupted
	v.FinishedAt = now
	return true
}

// interruptOrchestration marks an orchestration that was running when the
// agent stopped FAILED: its running steps FAILED (unless their subagent's
// record says how they ended), the ones not started CANCELLED. ended maps
// a subagent id to its stored terminal status and error. It reports whether
// it changed v.
func interruptOrchestration(v *pb.Orchestration, ended map[string]*pb.Subagent, now *timestamppb.Timestamp) bool {
	if v.GetStatus() != pb.OrchestrationStatus_ORCHESTRATION_STATUS_RUNNING {
		return false
	}
	for _, step := range v.GetSteps() {
		switch st := step.GetStatus(); {
		case st == pb.SubagentStatus_SUBAGENT_STATUS_PENDING:
			step.Status = pb.SubagentStatus_SUBAGENT_STATUS_CANCELLED
		case !terminal(st):
			step.Status, step.Error = pb.SubagentStatus_SUBAGENT_STATUS_FAILED, errInterrupted
			// The subagent's own record may be newer (it ended just
			// before the agent stopped, the step's update was not saved).
			if sa := ended[step.GetSubagentId()]; sa != nil && terminal(sa.GetStatus()) && sa.GetError() != errInterrupted {
				step.Status, step.Error = sa.GetStatus(), sa.GetError()
			}
		}
	}
	v.Status = pb.OrchestrationStatus_ORCHESTRATION_STATUS_FAILED
	v.FinishedAt = now
	return true
}
