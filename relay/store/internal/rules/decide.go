package rules

import (
	"fmt"

	"github.com/betcode-dev/betcode/relay/store"
)

// Usage is a machine's buffer occupancy.
type Usage struct {
	Messages int64
	Bytes    int64
}

// Key identifies a message for deduplication.
type Key struct{ MachineID, IdempotencyKey string }

// Item is one Enqueue of a batch, after Message.
type Item struct {
	Msg store.Message
	Lim store.Limits
}

// Outcome is what Decide chose for one Item.
type Outcome struct {
	// Insert: store the message and give it the next id.
	Insert bool
	// DupOf >= 0: a duplicate of the batch's item DupOf, which is inserted;
	// return that item's id.
	DupOf int
	// ID > 0: a duplicate of a stored message with this id.
	ID int64
	// Err: not stored (ErrBufferFull).
	Err error
}

// BufferFull is the error for m, refused because its machine holds u and
// lim leaves no room for it.
func BufferFull(m *store.Message, lim store.Limits, u Usage) error {
	return fmt.Errorf("%w: machine %q holds %d messages, %d bytes; a %d-byte message exceeds the limit of %d messages, %d bytes",
		store.ErrBufferFull, m.MachineID, u.Messages, u.Bytes, m.Size(), lim.MaxMessages, lim.MaxBytes)
}

// Decide admits the batch's items in order. usage holds each machine's
// occupancy before the batch (a missing machine is empty) and is updated to
// the occupancy after it; stored maps the keys already stored to their ids.
// full lists the machines that refused an item, in first-refusal order.
func Decide(items []Item, usage map[string]Usage, stored map[Key]int64) (outs []Outcome, full []string) {
	outs = make([]Outcome, len(items))
	inBatch := make(map[Key]int)
	refused := make(map[string]bool)
	for i := range items {
		m, lim := &items[i].Msg, items[i].Lim
		out := Outcome{DupOf: -1}
		k := Key{m.MachineID, m.IdempotencyKey}
		if m.IdempotencyKey != "" {
			if id, ok := stored[k]; ok {
				out.ID = id
				outs[i] = out
				continue
			}
			if j, ok := inBatch[k]; ok {
				out.DupOf = j
				outs[i] = out
				continue
			}
		}
		u := usage[m.MachineID]
		size := m.Size()
		if u.Messages+1 > int64(lim.MaxMessages) || u.Bytes+size > lim.MaxBytes {
			out.Err = BufferFull(m, lim, u)
			if !refused[m.MachineID] {
				refused[m.MachineID] = true
				full = append(full, m.MachineID)
			}
			outs[i] = out
			continue
		}
		u.Messages++
		u.Bytes += size
		usage[m.MachineID] = u
		out.Insert = true
		if m.IdempotencyKey != "" {
			inBatch[k] = i
		}
		outs[i] = out
	}
	return outs, full
}
