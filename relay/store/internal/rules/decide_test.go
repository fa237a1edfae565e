package rules

import (
	"errors"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
)

func TestDecide(t *testing.T) {
	lim := store.Limits{MaxMessages: 2, MaxBytes: 10}
	item := func(machine, key string, size int) Item {
		return Item{Msg: store.Message{MachineID: machine, IdempotencyKey: key, Payload: make([]byte, size)}, Lim: lim}
	}
	tests := []struct {
		name   string
		items  []Item
		usage  map[string]Usage
		stored map[Key]int64
		want   []Outcome // Err compared by ErrBufferFull only
		full   []string
	}{
		{
			name:  "fits",
			items: []Item{item("a", "1", 3), item("b", "1", 3)},
			want:  []Outcome{{Insert: true, DupOf: -1}, {Insert: true, DupOf: -1}},
		},
		{
			name:   "stored duplicate ignores caps",
			items:  []Item{item("a", "1", 3)},
			usage:  map[string]Usage{"a": {Messages: 2, Bytes: 10}},
			stored: map[Key]int64{{"a", "1"}: 7},
			want:   []Outcome{{DupOf: -1, ID: 7}},
		},
		{
			name:  "in-batch duplicate",
			items: []Item{item("a", "1", 3), item("a", "1", 3), item("a", "", 1), item("a", "", 1)},
			want:  []Outcome{{Insert: true, DupOf: -1}, {DupOf: 0}, {Insert: true, DupOf: -1}, {DupOf: -1, Err: store.ErrBufferFull}},
			full:  []string{"a"},
		},
		{
			name:  "bytes: a big one refused, a later small one fits",
			items: []Item{item("a", "1", 8), item("a", "2", 5), item("a", "3", 2)},
			want:  []Outcome{{Insert: true, DupOf: -1}, {DupOf: -1, Err: store.ErrBufferFull}, {Insert: true, DupOf: -1}},
			full:  []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			usage := tt.usage
			if usage == nil {
				usage = map[string]Usage{}
			}
			outs, full := Decide(tt.items, usage, tt.stored)
			for i, o := range outs {
				w := tt.want[i]
				if o.Insert != w.Insert || o.DupOf != w.DupOf || o.ID != w.ID || errors.Is(o.Err, store.ErrBufferFull) != (w.Err != nil) {
					t.Errorf("item %d: got %+v; want %+v", i, o, w)
				}
			}
			if len(full) != len(tt.full) || (len(full) > 0 && full[0] != tt.full[0]) {
				t.Errorf("full = %v; want %v", full, tt.full)
			}
		})
	}
}
