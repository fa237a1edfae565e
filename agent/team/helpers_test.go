package team

import (
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// checkProtos fails t unless got and want hold equal messages in order.
func checkProtos[M proto.Message](t *testing.T, what string, got, want []M) {
	t.Helper()
	equal := len(got) == len(want)
	for i := 0; equal && i < len(got); i++ {
		equal = proto.Equal(got[i], want[i])
	}
	if equal {
		return
	}
	t.Errorf("%s: got %d:", what, len(got))
	for _, m := range got {
		t.Errorf("  %s", prototext.Format(m))
	}
	t.Errorf("want %d:", len(want))
	for _, m := range want {
		t.Errorf("  %s", prototext.Format(m))
	}
	t.FailNow()
}
