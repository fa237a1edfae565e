package share

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"github.com/betcode-dev/betcode/agent/pairing"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
)

// CodeShareScope is the BetCode error code (PERMISSION_DENIED) of a call a
// share's device may not make; CodeShareEnded of any call once its share
// ended.
const (
	CodeShareScope = "SHARE_SCOPE"
	CodeShareEnded = "SHARE_ENDED"
)

// What a share's device may call, by mode. Every call that names a session
// must name the shared one.
var (
	// readMethods watch the session.
	readMethods = map[string]bool{
		"/betcode.v1.AgentService/ResumeSession":     true,
		"/betcode.v1.AgentService/ListPermissionLog": true,
		"/betcode.v1.SessionService/GetSession":      true,
		"/betcode.v1.SessionService/WatchSession":    true,
	}
	// answerMethods answer its prompts (ModeAnswer only).
	answerMethods = map[string]bool{
		"/betcode.v1.AgentService/AnswerPermission": true,
		"/betcode.v1.AgentService/AnswerQuestion":   true,
	}
	// listMethods list sessions: a share's device sees the shared one only
	// (Gate filters the answers), so that the web app's session list and
	// event socket work for it unchanged.
	listMethods = map[string]bool{
		"/betcode.v1.AgentService/WatchSessions": true,
		"/betcode.v1.AgentService/ListSessions":  true,
	}
	// openMethods name no session and show nothing of any.
	openMethods = map[string]bool{
		"/betcode.v1.VersionService/GetVersion":            true,
		"/betcode.v1.VersionService/NegotiateCapabilities": true,
		"/grpc.health.v1.Health/Check":                     true,
		"/grpc.health.v1.Health/Watch":                     true,
	}
)

// Gate limits the calls of a share's device to its grant. Calls from any
// other connection pass unchanged (localtoken.Guard judges those).
type Gate struct {
	Devices *pairing.Store
	Grants  *Store
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// sessionRequest is a request that names a session.
type sessionRequest interface{ GetSessionId() string }

// grantOf returns the grant of the call's device: ok is false when the
// call is not a share device's (it passes), err set when it is and its
// share ended.
func (g *Gate) grantOf(ctx context.Context) (Grant, bool, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Grant{}, false, nil
	}
	a, ok := p.Addr.(e2ee.Addr)
	if !ok || a.Role != e2ee.RoleDevice {
		return Grant{}, false, nil
	}
	dev, ok := g.Devices.ByFingerprint(a.Fingerprint)
	if !ok || dev.Share == "" {
		return Grant{}, false, nil
	}
	gr, ok := g.Grants.Get(dev.Share)
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	if !ok || !gr.Live(now()) || dev.Ended(now()) {
		return Grant{}, true, server.Status(codes.PermissionDenied, CodeShareEnded, pairing.ErrShareEnded.Error())
	}
	return gr, true, nil
}

// allowed reports whether gr lets its device call method (before its
// request is known).
func allowed(gr Grant, method string) error {
	switch {
	case openMethods[method], readMethods[method], listMethods[method]:
		return nil
	case answerMethods[method] && gr.Mode == ModeAnswer:
		return nil
	case answerMethods[method]:
		return server.Status(codes.PermissionDenied, CodeShareScope,
			"this session was shared with you read-only: you cannot answer its prompts")
	}
	return server.Status(codes.PermissionDenied, CodeShareScope,
		"a shared session's device may only watch that session"+modeSuffix(gr)+": "+strings.TrimPrefix(method, "/")+" is not allowed")
}

func modeSuffix(gr Grant) string {
	if gr.Mode == ModeAnswer {
		return " and answer its prompts"
	}
	return ""
}

// checkSession refuses a request that names a session other than gr's.
func checkSession(gr Grant, req any) error {
	r, ok := req.(sessionRequest)
	if !ok {
		return nil // openMethods' requests
	}
	if r.GetSessionId() != gr.SessionID {
		return server.Status(codes.PermissionDenied, CodeShareScope, "only session "+gr.SessionID+" was shared with you")
	}
	return nil
}

// UnaryInterceptor enforces the grant on unary calls.
func (g *Gate) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	gr, shared, err := g.grantOf(ctx)
	if !shared {
		return handler(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	if err := allowed(gr, info.FullMethod); err != nil {
		return nil, err
	}
	if err := checkSession(gr, req); err != nil {
		return nil, err
	}
	resp, err := handler(ctx, req)
	if l, ok := resp.(*pb.ListSessionsResponse); ok && err == nil {
		resp = onlyShared(gr, l)
	}
	return resp, err
}

// onlyShared is a session list with the shared session only.
func onlyShared(gr Grant, l *pb.ListSessionsResponse) *pb.ListSessionsResponse {
	out := &pb.ListSessionsResponse{}
	for _, s := range l.Sessions {
		if s.GetId() == gr.SessionID {
			out.Sessions = append(out.Sessions, s)
		}
	}
	out.Total = uint32(len(out.Sessions))
	return out
}

// StreamInterceptor enforces the grant on streaming calls: every message
// the device sends must name the shared session.
func (g *Gate) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	gr, shared, err := g.grantOf(ss.Context())
	if !shared {
		return handler(srv, ss)
	}
	if err != nil {
		return err
	}
	if err := allowed(gr, info.FullMethod); err != nil {
		return err
	}
	return handler(srv, &gatedStream{ServerStream: ss, grant: gr})
}

// gatedStream checks each received message's session.
type gatedStream struct {
	grpc.ServerStream
	grant Grant
}

// SendMsg drops the session updates of other sessions (WatchSessions).
func (s *gatedStream) SendMsg(m any) error {
	if u, ok := m.(*pb.SessionUpdate); ok && u.Session != nil && u.Session.GetId() != s.grant.SessionID {
		return nil
	}
	return s.ServerStream.SendMsg(m)
}

func (s *gatedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkSession(s.grant, m)
}
