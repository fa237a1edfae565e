package enrollsvc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/enrollsvc"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// failingStore is a store whose chosen method fails.
type failingStore struct {
	enrollsvc.Store
	fail string // the method that fails
}

var errDisk = errors.New("disk I/O error at /var/lib/betcode/relay.db")

func (f *failingStore) ConsumeEnrollToken(ctx context.Context, hash []byte, machineID string, now time.Time) (store.EnrollToken, error) {
	if f.fail == "ConsumeEnrollToken" {
		return store.EnrollToken{}, errDisk
	}
	return f.Store.ConsumeEnrollToken(ctx, hash, machineID, now)
}

func (f *failingStore) UpsertMachine(ctx context.Context, m store.Machine) error {
	if f.fail == "UpsertMachine" {
		return errDisk
	}
	return f.Store.UpsertMachine(ctx, m)
}

func (f *failingStore) RecordCertificate(ctx context.Context, machineID, serial string, notAfter time.Time) error {
	if f.fail == "RecordCertificate" {
		return errDisk
	}
	return f.Store.RecordCertificate(ctx, machineID, serial, notAfter)
}

func (f *failingStore) AppendAudit(ctx context.Context, e store.AuditEvent) error {
	if f.fail == "AppendAudit" {
		return errDisk
	}
	return f.Store.AppendAudit(ctx, e)
}

// TestEnrollStoreFailures checks that a failing store gives INTERNAL with
// a message that says whether the token was spent, keeps the cause out of
// the answer and in the log, and audits the failure as an error; and that
// a lost audit event does not fail an enrollment.
func TestEnrollStoreFailures(t *testing.T) {
	tests := []struct {
		method      string
		wantOK      bool
		msg         string
		wantOutcome string // of the enroll.refused event
	}{
		{method: "ConsumeEnrollToken", msg: "cannot check the join token", wantOutcome: "error"},
		{method: "UpsertMachine", msg: "was used up, but the machine could not be enrolled; ask for a new one", wantOutcome: "error"},
		{method: "RecordCertificate", msg: "was used up, but the machine could not be enrolled; ask for a new one", wantOutcome: "error"},
		{method: "AppendAudit", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			e := newEnv(t)
			e.svc.Store = &failingStore{Store: e.st, fail: tt.method}
			token := e.joinToken(t, "infra", "alice", e.now.Add(time.Hour))
			_, err := e.svc.Enroll(plainCtx(t), &pb.EnrollRequest{JoinToken: token, CsrDer: newCSR(t, machineKey(t), nil)})
			if !strings.Contains(e.logs.String(), errDisk.Error()) {
				t.Errorf("the log lacks the cause:\n%s", e.logs.String())
			}
			if tt.wantOK {
				if err != nil {
					t.Fatalf("Enroll failed for a lost audit event: %v", err)
				}
				if !strings.Contains(e.logs.String(), "audit event lost") {
					t.Error("the lost audit event was not logged")
				}
				return
			}
			checkStatus(t, err, codes.Internal, enrollsvc.CodeInternal, tt.msg)
			if strings.Contains(status.Convert(err).Message(), errDisk.Error()) {
				t.Errorf("the answer carries the internal cause: %q", status.Convert(err).Message())
			}
			ev := e.audit(t, enrollsvc.ActionEnrollRefused)
			if len(ev) != 1 || ev[0].Outcome != tt.wantOutcome {
				t.Errorf("audit %+v, want one %s with outcome %s", ev, enrollsvc.ActionEnrollRefused, tt.wantOutcome)
			}
		})
	}
}
