package main

import (
	"bytes"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestPrintWorktrees(t *testing.T) {
	tests := []struct {
		name string
		in   []*pb.WorktreeInfo
		want string
	}{
		{
			name: "main, linked with a session, detached, locked, missing",
			in: []*pb.WorktreeInfo{
				{Id: "wt-1", Name: "shop", Branch: "main", IsMain: true, Path: "/src/shop"},
				{Id: "wt-2", Name: "feature/a", Branch: "feature/a", ActiveSessionId: "s-1", Path: "/src/shop.worktrees/feature-a"},
				{Id: "wt-3", Name: "probe", Detached: true, Head: "0123456789abcdef", Path: "/src/probe"},
				{Id: "wt-4", Name: "usb", Branch: "usb", Locked: true, LockReason: "on usb disk", Path: "/media/usb"},
				{Id: "wt-5", Name: "old", Branch: "old", Locked: true, Path: "/src/old"},
				{Id: "wt-6", Name: "gone", Branch: "gone", Prunable: true, Path: "/src/gone"},
			},
			want: `ID    NAME       BRANCH               STATE                SESSION  PATH
wt-1  shop       main                 main                 -        /src/shop
wt-2  feature/a  feature/a            -                    s-1      /src/shop.worktrees/feature-a
wt-3  probe      (detached 01234567)  -                    -        /src/probe
wt-4  usb        usb                  locked: on usb disk  -        /media/usb
wt-5  old        old                  locked               -        /src/old
wt-6  gone       gone                 missing              -        /src/gone
`,
		},
		{name: "none", want: "ID  NAME  BRANCH  STATE  SESSION  PATH\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printWorktrees(&b, tt.in); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
