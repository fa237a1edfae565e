// Package channelsvc is the agent's door for calls that come through a
// relay: ChannelService, whose Open runs the Noise channel of a paired
// device and hands the decrypted connection to the agent's own gRPC server
// (Listener), and whose Pair pairs a new device with a one-time code; and
// DeviceService, which lists, renames and revokes paired devices and makes
// pairing codes (served locally and inside channels, never to the relay).
//
// The relay sees only Noise messages: it can route, count and refuse them,
// not read or forge them (docs/security.md).
package channelsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/h2wire"
)

// HandshakeTimeout bounds a channel's or a pairing's handshake.
const HandshakeTimeout = 15 * time.Second

// Relay is what pairing needs of the agent's relay link.
type Relay interface {
	// Addr is the relay's host:port, as devices dial it.
	Addr() string
	// IssuePairingTicket gets the relay credential of one Pair call.
	IssuePairingTicket(ctx context.Context) (ticket string, expires time.Time, err error)
	// IssueDeviceToken gets a relay credential scoped to this machine.
	IssueDeviceToken(ctx context.Context, deviceName string) (token, tokenID string, err error)
	// RevokeDeviceToken revokes one.
	RevokeDeviceToken(ctx context.Context, tokenID string) error
}

// Service serves ChannelService and DeviceService.
type Service struct {
	pb.UnimplementedChannelServiceServer
	pb.UnimplementedDeviceServiceServer

	Store       *pairing.Store
	MachineID   string
	MachineName string
	// Relay is nil when the agent has no relay: pairing is then refused.
	Relay    Relay
	Listener *Listener
	Log      *slog.Logger
	// Sessions and Seen serve Deliver (sealed envelopes, deliver.go):
	// where their messages go and the ids already taken; Now is the clock
	// that judges their age (nil: time.Now).
	Sessions Sessions
	Seen     *pairing.Seen
	Now      func() time.Time
	// Version is the agent's version, which a browser channel's web API
	// sends with its calls (web.go).
	Version string
	// PushHandler, if set, serves a browser channel's /push/... requests
	// (paths without /api); DeviceFromContext names the calling device.
	PushHandler http.Handler
}

// streamTransport carries Noise messages on a server stream; Close marks
// the channel over, which lets the handler return and end the call.
type streamTransport struct {
	send func([]byte) error
	recv func() ([]byte, error)
	once sync.Once
	done chan struct{}
}

func (t *streamTransport) Send(b []byte) error {
	select {
	case <-t.done:
		return io.ErrClosedPipe
	default:
	}
	return t.send(b)
}

func (t *streamTransport) Recv() ([]byte, error) { return t.recv() }

// Close ends the call: the handler returns once it is closed.
func (t *streamTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return nil
}

// Open runs one end-to-end channel until either side ends it.
func (s *Service) Open(stream grpc.BidiStreamingServer[pb.OpenRequest, pb.OpenResponse]) error {
	ctx := stream.Context()
	t := &streamTransport{done: make(chan struct{}),
		send: func(b []byte) error { return stream.Send(&pb.OpenResponse{Data: b}) },
		recv: func() ([]byte, error) {
			m, err := stream.Recv()
			return m.GetData(), err
		}}
	var dev pairing.Device
	var hello pairing.Hello
	hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	c, err := e2ee.Accept(hctx, t, s.Store.Key(), s.MachineID, func(pub, raw []byte) error {
		var err error
		if dev, err = s.Store.Authorize(pub); err != nil {
			return err
		}
		return checkHello(raw, &hello)
	})
	cancel()
	if err != nil {
		s.Log.Info("end-to-end channel refused", "err", err)
		if errors.Is(err, e2ee.ErrRefused) {
			return server.Status(codes.PermissionDenied, "DEVICE_NOT_PAIRED", err.Error())
		}
		return server.Status(codes.Unauthenticated, "CHANNEL_HANDSHAKE_FAILED", "end-to-end channel handshake failed: "+err.Error())
	}
	forget := s.Store.Track(dev.ID, c)
	defer forget()
	s.Log.Debug("end-to-end channel open", "device", dev.ID, "name", dev.Name)
	if hello.Protocol == pairing.ProtocolWeb {
		return s.serveWebStatus(ctx, c, dev)
	}
	// The machine's gRPC server frames each streamed event on its own; the
	// channel joins the frames it gathers, so the device's transport
	// handles one frame for many events (as the relay does for the calls
	// it can read).
	c.SetSendFilter(new(h2wire.DataMerger).Merge)
	if err := s.Listener.deliver(ctx, c); err != nil {
		c.Close()
		return server.Status(codes.Unavailable, "", "the agent is shutting down")
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		c.Close()
	}
	return nil
}

// Pair pairs one device with a pairing code's secret.
func (s *Service) Pair(stream grpc.BidiStreamingServer[pb.PairRequest, pb.PairResponse]) error {
	ctx := stream.Context()
	if s.Relay == nil {
		return server.Status(codes.FailedPrecondition, "PAIRING_FAILED", "this agent has no relay to pair through")
	}
	t := &streamTransport{done: make(chan struct{}),
		send: func(b []byte) error { return stream.Send(&pb.PairResponse{Data: b}) },
		recv: func() ([]byte, error) {
			m, err := stream.Recv()
			return m.GetData(), err
		}}
	defer t.Close()
	var offer *pairing.Offer
	hctx, cancel := context.WithTimeout(ctx, HandshakeTimeout)
	defer cancel()
	c, helloRaw, err := e2ee.PairMachine(hctx, t, s.Store.Key(), s.MachineID, func(id string) ([]byte, error) {
		o, err := s.Store.Take(id)
		if err != nil {
			return nil, err
		}
		offer = o
		return o.Secret, nil
	})
	failed := func() {
		if offer != nil {
			close(offer.Paired)
			offer = nil
		}
	}
	defer failed()
	if err != nil {
		s.Log.Warn("pairing refused", "err", err)
		return server.Status(codes.PermissionDenied, "PAIRING_FAILED", "pairing failed: "+err.Error())
	}
	defer c.Close()
	var hello pairing.Hello
	_ = json.Unmarshal(helloRaw, &hello)
	if pairing.CheckName(hello.Name) != nil {
		hello.Name = "device " + e2ee.FingerprintID(c.PeerStatic())[:8]
	}
	var (
		dev     pairing.Device
		welcome pairing.Welcome
	)
	if offer.Share != nil {
		dev, welcome, err = s.addShareDevice(c, offer.Share, hello.Name)
	} else {
		dev, welcome, err = s.addDevice(hctx, c, hello.Name)
	}
	if err != nil {
		return err
	}
	welcome.MachineID, welcome.MachineName, welcome.DeviceID = s.MachineID, s.MachineName, dev.ID
	if err := writeJSON(c, welcome); err != nil {
		return server.Status(codes.Unavailable, "PAIRING_FAILED", "send the pairing to the device: "+err.Error())
	}
	if dev.Share != "" {
		s.Log.Info("teammate's device paired for a session share", "device", dev.ID, "name", dev.Name, "share", dev.Share)
	} else {
		s.Log.Info("device paired", "device", dev.ID, "name", dev.Name, "fingerprint", dev.Fingerprint)
	}
	offer.Paired <- dev
	close(offer.Paired)
	offer = nil
	// The device says it stored the pairing (or goes away); either way the
	// call ends.
	_, _ = c.ReadMessage()
	return nil
}

// addDevice pairs the device of an ordinary pairing code: it gets a relay
// credential of its own, scoped to this machine. On failure it tells the
// device why.
func (s *Service) addDevice(ctx context.Context, c *e2ee.Conn, name string) (pairing.Device, pairing.Welcome, error) {
	token, tokenID, err := s.Relay.IssueDeviceToken(ctx, name)
	if err != nil {
		msg := "the relay would not issue the device's credential: " + err.Error()
		_ = writeJSON(c, pairing.Welcome{Error: msg})
		return pairing.Device{}, pairing.Welcome{}, server.Status(codes.Unavailable, "PAIRING_FAILED", msg)
	}
	dev, err := s.Store.Add(c.PeerStatic(), name, tokenID)
	if err != nil {
		_ = s.Relay.RevokeDeviceToken(context.WithoutCancel(ctx), tokenID)
		_ = writeJSON(c, pairing.Welcome{Error: "the machine could not store the pairing"})
		return pairing.Device{}, pairing.Welcome{}, server.Status(codes.Internal, "PAIRING_FAILED", err.Error())
	}
	return dev, pairing.Welcome{Token: token}, nil
}

// addShareDevice pairs the device of a session share's code: the
// teammate's device gets the share's own relay credential (the
// teammate's, made with the share) and a pairing limited to that share
// (agent/share enforces it). On failure it tells the device why.
func (s *Service) addShareDevice(c *e2ee.Conn, sh *pairing.ShareOffer, name string) (pairing.Device, pairing.Welcome, error) {
	if s.now().After(sh.Expires) {
		_ = writeJSON(c, pairing.Welcome{Error: pairing.ErrShareEnded.Error()})
		return pairing.Device{}, pairing.Welcome{}, server.Status(codes.PermissionDenied, "SHARE_ENDED", pairing.ErrShareEnded.Error())
	}
	dev, err := s.Store.AddShare(c.PeerStatic(), name, sh)
	if err != nil {
		_ = writeJSON(c, pairing.Welcome{Error: "the machine could not store the pairing"})
		return pairing.Device{}, pairing.Welcome{}, server.Status(codes.Internal, "PAIRING_FAILED", err.Error())
	}
	return dev, pairing.Welcome{Token: sh.Token,
		Share: &pairing.WelcomeShare{ID: sh.ID, SessionID: sh.SessionID, Mode: sh.Mode, ExpiresAt: sh.Expires.UTC()}}, nil
}

func writeJSON(c *e2ee.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.WriteMessage(b)
}

// ListDevices lists the paired devices.
func (s *Service) ListDevices(context.Context, *pb.ListDevicesRequest) (*pb.ListDevicesResponse, error) {
	out := &pb.ListDevicesResponse{}
	for _, d := range s.Store.List() {
		out.Devices = append(out.Devices, ToProto(d))
	}
	return out, nil
}

// RenameDevice renames one device.
func (s *Service) RenameDevice(_ context.Context, req *pb.RenameDeviceRequest) (*pb.RenameDeviceResponse, error) {
	d, err := s.Store.Rename(req.DeviceId, req.Name)
	if err != nil {
		return nil, storeStatus(err)
	}
	return &pb.RenameDeviceResponse{Device: ToProto(d)}, nil
}

// RevokeDevice revokes one device, ends its channels and revokes its relay
// credential.
func (s *Service) RevokeDevice(ctx context.Context, req *pb.RevokeDeviceRequest) (*pb.RevokeDeviceResponse, error) {
	d, n, err := s.Store.Revoke(req.DeviceId)
	if err != nil {
		return nil, storeStatus(err)
	}
	s.Log.Info("device revoked", "device", d.ID, "name", d.Name, "channels_closed", n)
	if s.Relay != nil && d.RelayTokenID != "" {
		if err := s.Relay.RevokeDeviceToken(ctx, d.RelayTokenID); err != nil {
			// The machine refuses the device either way; the relay
			// credential alone opens nothing.
			s.Log.Warn("revoke the device's relay credential", "device", d.ID, "err", err)
		}
	}
	return &pb.RevokeDeviceResponse{Device: ToProto(d), ChannelsClosed: uint32(n)}, nil
}

// StartPairing makes a pairing code and waits for its device.
func (s *Service) StartPairing(_ *pb.StartPairingRequest, stream grpc.ServerStreamingServer[pb.StartPairingResponse]) error {
	ctx := stream.Context()
	if s.Relay == nil {
		return server.Status(codes.FailedPrecondition, "NO_RELAY",
			"this agent is not connected to a relay: enroll it first (betcode-agent enroll --relay HOST:PORT --token bcj_…)")
	}
	o, err := s.Store.NewOffer()
	if err != nil {
		return storeStatus(err)
	}
	defer s.Store.Withdraw(o)
	ticket, _, err := s.Relay.IssuePairingTicket(ctx)
	if err != nil {
		return server.Status(codes.Unavailable, "RELAY_UNAVAILABLE", "get a pairing ticket from the relay: "+err.Error())
	}
	code := e2ee.PairingCode{Relay: s.Relay.Addr(), MachineID: s.MachineID, Fingerprint: s.Store.Fingerprint(),
		Offer: o.ID, Secret: o.Secret, Ticket: ticket}
	if err := stream.Send(&pb.StartPairingResponse{Step: &pb.StartPairingResponse_Code{Code: &pb.PairingCode{
		Text: code.String(), ExpiresAt: timestamp(o.Expires), MachineFingerprint: s.Store.Fingerprint(),
	}}}); err != nil {
		return err
	}
	expiry := time.NewTimer(time.Until(o.Expires))
	defer expiry.Stop()
	select {
	case d, ok := <-o.Paired:
		if !ok {
			return server.Status(codes.Aborted, "PAIRING_FAILED", "a device tried this code and failed: the code is spent; make a new one")
		}
		return stream.Send(&pb.StartPairingResponse{Step: &pb.StartPairingResponse_Paired{Paired: ToProto(d)}})
	case <-expiry.C:
		return server.Status(codes.DeadlineExceeded, "PAIRING_EXPIRED",
			fmt.Sprintf("the pairing code expired unused after %s; make a new one", pairing.OfferTTL))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func storeStatus(err error) error {
	switch {
	case errors.Is(err, pairing.ErrNoDevice):
		return server.Status(codes.NotFound, "DEVICE_NOT_FOUND", err.Error())
	case errors.Is(err, pairing.ErrAmbiguous), errors.Is(err, pairing.ErrInvalidName):
		return server.Status(codes.InvalidArgument, "INVALID_ARGUMENT", err.Error())
	case errors.Is(err, pairing.ErrOfferLimit):
		return server.Status(codes.ResourceExhausted, "PAIRING_LIMIT", err.Error())
	}
	return server.Status(codes.Internal, "", err.Error())
}
