package enrollsvc

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/relay/pki"
	"github.com/betcode-dev/betcode/relay/store"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// RenewCertificate signs a new certificate for the calling machine, named
// by the verified client certificate of its connection (never by the
// request). A revoked machine, or one the store does not know, is refused.
func (s *Service) RenewCertificate(ctx context.Context, req *pb.RenewCertificateRequest) (*pb.RenewCertificateResponse, error) {
	now := s.now()
	ev := store.AuditEvent{Action: ActionRenewRefused, Remote: remoteAddr(ctx)}
	if s.CA == nil {
		return nil, s.refuse(ctx, ev, errNoCA)
	}
	id, err := mtls.MachineIDFromPeer(ctx)
	if err != nil {
		return nil, s.refuse(ctx, ev, &refusal{code: codes.Unauthenticated, betcode: CodeNoClientCert,
			msg: "renewing needs the machine's current certificate: " + err.Error()})
	}
	ev.Actor, ev.Target = "machine:"+id, id
	// MachineIDFromPeer found a verified leaf, so there is one.
	oldSerial := mtls.SerialHex(peerLeaf(ctx))
	if s.IsRevoked != nil && s.IsRevoked(id, oldSerial) {
		return nil, s.refuse(ctx, ev, revoked(id, time.Time{}))
	}
	m, err := s.Store.GetMachine(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, s.refuse(ctx, ev, &refusal{code: codes.NotFound, betcode: CodeMachineNotFound,
			msg: fmt.Sprintf("machine %q is not registered on this relay (deleted?); enroll it again with a new join token", id)})
	}
	if err != nil {
		return nil, s.refuse(ctx, ev, internal("cannot look up the machine", fmt.Errorf("get machine %s: %w", id, err)))
	}
	if !m.RevokedAt.IsZero() {
		return nil, s.refuse(ctx, ev, revoked(id, m.RevokedAt))
	}
	certPEM, cert, err := s.CA.SignMachineCSR(req.GetCsrDer(), id, s.lifetime(), now)
	if errors.Is(err, pki.ErrBadCSR) {
		return nil, s.refuse(ctx, ev, &refusal{code: codes.InvalidArgument, betcode: CodeInvalidCSR, msg: "csr_der: " + err.Error()})
	}
	if err != nil {
		return nil, s.refuse(ctx, ev, internal("cannot sign certificates", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	serial := mtls.SerialHex(cert)
	// Recorded before it is handed out, so that revoking the machine
	// revokes this certificate too.
	if err := s.Store.RecordCertificate(ctx, id, serial, cert.NotAfter); err != nil {
		return nil, s.refuse(ctx, ev, internal("cannot record the new certificate", fmt.Errorf("record certificate %s of machine %s: %w", serial, id, err)))
	}
	s.audit(ctx, store.AuditEvent{
		Action: ActionRenewed, Actor: ev.Actor, Target: id, Remote: ev.Remote, Outcome: outcomeOK,
		Detail: fmt.Sprintf("certificate %s replaces %s", serial, oldSerial),
	})
	s.log().Info("enroll service: certificate renewed", "machine_id", id, "serial", serial, "old_serial", oldSerial,
		"not_after", cert.NotAfter, "remote", ev.Remote)
	return &pb.RenewCertificateResponse{CertificatePem: certPEM, NotAfter: timestamppb.New(cert.NotAfter)}, nil
}

func revoked(id string, at time.Time) *refusal {
	when := ""
	if !at.IsZero() {
		when = " at " + at.UTC().Format(time.RFC3339)
	}
	return &refusal{code: codes.PermissionDenied, betcode: CodeMachineRevoked,
		msg: fmt.Sprintf("machine %q was revoked%s; enroll it again with a new join token", id, when)}
}

// peerLeaf returns the verified client certificate of the call's
// connection, or nil.
func peerLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}
