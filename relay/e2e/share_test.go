package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/relay/pki"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/e2ee"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// shareWelcome is the machine's answer to a device that paired (agent/pairing.Welcome).
type shareWelcome struct {
	MachineID string `json:"machine_id"`
	DeviceID  string `json:"device_id"`
	Token     string `json:"token"`
	Error     string `json:"error"`
}

// pairTransport carries Noise messages on a ChannelService.Pair stream.
type pairTransport struct {
	s grpc.BidiStreamingClient[pb.PairRequest, pb.PairResponse]
}

func (p pairTransport) Send(b []byte) error { return p.s.Send(&pb.PairRequest{Data: b}) }
func (p pairTransport) Recv() ([]byte, error) {
	m, err := p.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}
func (p pairTransport) Close() error { return p.s.CloseSend() }

// teammate is one device of a teammate's: its key, and once paired, the
// share's relay credential and the machine key it pinned.
type teammate struct {
	key        e2ee.KeyPair
	token      string
	machinePub []byte
}

// pairShare pairs a new device with a share code, making the Pair call
// with login (a user's own relay token), as `betcode pair CODE` does.
func pairShare(ctx context.Context, t *testing.T, w *world, login, code string) (*teammate, error) {
	t.Helper()
	c, err := e2ee.ParsePairingCode(code)
	if err != nil {
		t.Fatalf("the share code does not parse: %v", err)
	}
	key, err := e2ee.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewChannelServiceClient(w.dial(w.addr, login)).Pair(onMachine(sctx, c.MachineID))
	if err != nil {
		return nil, err
	}
	conn, err := e2ee.PairDevice(sctx, pairTransport{stream}, key, c, []byte(`{"name":"teammate phone"}`))
	if err != nil {
		return nil, err
	}
	raw, err := conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	var wel shareWelcome
	if err := json.Unmarshal(raw, &wel); err != nil {
		return nil, err
	}
	if wel.Error != "" || wel.Token == "" {
		return nil, errors.New("pairing refused by the machine: " + wel.Error)
	}
	_ = conn.WriteMessage([]byte("stored"))
	return &teammate{key: key, token: wel.Token, machinePub: conn.PeerStatic()}, nil
}

// channel returns a gRPC connection whose every transport is a new
// end-to-end channel of d to machine, through the relay with d's token.
func (d *teammate) channel(ctx context.Context, t *testing.T, w *world, machine string) *grpc.ClientConn {
	t.Helper()
	relay := w.dial(w.addr, d.token)
	cc, err := grpc.NewClient("passthrough:///share", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(dctx context.Context, _ string) (net.Conn, error) {
			stream, err := pb.NewChannelServiceClient(relay).Open(onMachine(ctx, machine))
			if err != nil {
				return nil, err
			}
			return e2ee.Dial(dctx, openTransport{stream}, d.key, machine, d.machinePub, []byte(`{"name":"teammate phone"}`))
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// shareCode runs betcode session share on the machine and returns the code
// and the share's id.
func shareCode(ctx context.Context, t *testing.T, a *agent, args ...string) (code, id string) {
	t.Helper()
	cmd := append([]string{"--agent", "unix://" + a.sock, "session", "share"}, args...)
	out, err := (&device{env: cleanEnv()}).run(ctx, t, "", cmd...)
	m := regexp.MustCompile(`(?m)^\s*betcode pair (\S+)$`).FindStringSubmatch(out)
	s := regexp.MustCompile(`share (sh-[0-9a-f]+)\n`).FindStringSubmatch(out)
	if err != nil || m == nil || s == nil {
		t.Fatalf("betcode session share %v: %v\n%s", args, err, out)
	}
	return m[1], s[1]
}

// watchEnd watches a health stream on cc and returns a func that waits
// for it to end and returns when it did.
func watchEnd(ctx context.Context, t *testing.T, cc *grpc.ClientConn) func() time.Time {
	t.Helper()
	watch, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatalf("the teammate's health watch: %v", err)
	}
	ended := make(chan time.Time, 1)
	go func() {
		for {
			if _, err := watch.Recv(); err != nil {
				ended <- time.Now()
				return
			}
		}
	}()
	return func() time.Time {
		select {
		case at := <-ended:
			return at
		case <-time.After(10 * time.Second):
			t.Fatal("the teammate's stream is still open 10 s after its share ended (or was to)")
			return time.Time{}
		}
	}
}

// wantDenied checks err is PERMISSION_DENIED with BetCode code code.
func wantDenied(t *testing.T, what string, err error, code string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(errDetails(err), code) {
		t.Errorf("%s: %v, want PERMISSION_DENIED (%s)", what, err, code)
	}
}

// TestSessionShare shares a live session of alice's machine with bob
// through the relay (docs/security.md, "Sharing a session"): read-only
// bob streams it but cannot answer, nor reach another session or any
// other call; answer-mode bob answers its prompt; unshare and expiry cut
// bob's open stream within a second and refuse him after; carol, a third
// user, can neither use the code nor open a channel.
func TestSessionShare(t *testing.T) {
	w := newWorld(t, pgtest.URL(t))
	a := w.startE2EAgent("shared")
	ctx := ctxT(t, 3*time.Minute)
	bob, carol := w.token("bob"), w.token("carol")

	local, err := grpc.NewClient("unix://"+a.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	api := pb.NewAgentServiceClient(local)
	st, err := api.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: a.project, Name: "shared",
		Message: &pb.UserMessage{Content: "please RUNTOOL now"}})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Session.Id
	_, pending, err := followSession(t, ctx, api, sid).next(ctx, 0, func(ev *pb.AgentEvent) bool { return ev.GetPermissionRequest() != nil })
	if err != nil {
		t.Fatalf("the shared session's permission prompt: %v", err)
	}
	reqID := pending.ev.GetPermissionRequest().RequestId
	other, err := api.StartSession(ctx, &pb.StartSessionRequest{WorkingDirectory: a.project, Name: "not shared"})
	if err != nil {
		t.Fatal(err)
	}

	code, readID := shareCode(ctx, t, a, sid, "--with", "bob", "--until", "1h")
	t.Run("a third user can neither use the code nor reach the machine", func(t *testing.T) {
		if _, err := pairShare(ctx, t, w, carol, code); err == nil || !strings.Contains(err.Error(), "no machine") {
			t.Errorf("carol pairing with bob's share code: %v, want the relay's NOT_FOUND", err)
		}
		stream, err := pb.NewChannelServiceClient(w.dial(w.addr, carol)).Open(onMachine(ctx, "shared"))
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.NotFound {
			t.Errorf("carol opening a channel to alice's machine: %v, want NOT_FOUND", err)
		}
	})
	reader, err := pairShare(ctx, t, w, bob, code)
	if err != nil {
		t.Fatalf("bob pairing with the share code: %v", err)
	}
	if _, err := pairShare(ctx, t, w, bob, code); err == nil {
		t.Error("a share code paired twice")
	}
	rc := reader.channel(ctx, t, w, "shared")
	rapi := pb.NewAgentServiceClient(rc)

	t.Run("read-only: streams the session, cannot answer", func(t *testing.T) {
		if _, _, err := followSession(t, ctx, rapi, sid).next(ctx, 0, func(ev *pb.AgentEvent) bool {
			return ev.GetPermissionRequest().GetRequestId() == reqID
		}); err != nil {
			t.Fatalf("bob streaming the shared session: %v", err)
		}
		_, err := rapi.AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: sid,
			Response: &pb.PermissionResponse{RequestId: reqID, Decision: pb.PermissionDecision_ALLOW_ONCE}})
		wantDenied(t, "a read-only teammate's AnswerPermission", err, "SHARE_SCOPE")
	})
	t.Run("other sessions and other calls are refused", func(t *testing.T) {
		r, err := rapi.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: other.Session.Id})
		if err == nil {
			_, err = r.Recv()
		}
		wantDenied(t, "ResumeSession of a session not shared", err, "SHARE_SCOPE")
		allowed := map[string]bool{"ResumeSession": true, "ListPermissionLog": true, "GetSession": true, "WatchSession": true,
			"AnswerPermission": true, "AnswerQuestion": true, "GetVersion": true, "NegotiateCapabilities": true,
			"ListSessions": true, "WatchSessions": true}
		list, err := rapi.ListSessions(ctx, &pb.ListSessionsRequest{})
		if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Id != sid {
			t.Errorf("the teammate's ListSessions: %v %v, want the shared session only", list, err)
		}
		n := 0
		for _, m := range agentMethods(t) {
			if allowed[string(m.Name())] {
				continue
			}
			n++
			wantDenied(t, string(m.FullName())+" from a teammate's device", invokeAny(ctxT(t, 10*time.Second), rc, m), "SHARE_SCOPE")
		}
		t.Logf("%d methods refused to the teammate", n)
	})

	t.Run("the teammate's CLI pairs with its login and sees the shared session only", func(t *testing.T) {
		code, _ := shareCode(ctx, t, a, sid, "--with", "bob", "--until", "1h")
		ca := filepath.Join(w.pki, pki.CACertFile)
		cli := func(user, login string) *device {
			d := newDevice(t, w)
			cmd := exec.CommandContext(ctx, bin(t, "betcode"), "login", "--relay", w.addr, "--relay-ca", ca)
			cmd.Env, cmd.Stdin = d.env, strings.NewReader(login+"\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("betcode login as %s: %v\n%s", user, err, out)
			}
			return d
		}
		if out, err := cli("carol", carol).run(ctx, t, "", "pair", code, "--relay-ca", ca); err == nil || !strings.Contains(out, "only bob can use it") {
			t.Errorf("carol's betcode pair with bob's code: %v\n%s", err, out)
		}
		d := cli("bob", bob)
		if out, err := d.run(ctx, t, "", "pair", code, "--relay-ca", ca, "--name", "bob's laptop"); err != nil || !strings.Contains(out, "shares a session with bob") {
			t.Fatalf("bob's betcode pair with the share code: %v\n%s", err, out)
		}
		out, err := d.run(ctx, t, "", "sessions")
		if err != nil || !strings.Contains(out, sid) || strings.Contains(out, other.Session.Id) {
			t.Errorf("bob's betcode sessions: %v, want the shared session only:\n%s", err, out)
		}
	})

	answerCode, answerID := shareCode(ctx, t, a, sid, "--with", "bob", "--answer")
	answerer, err := pairShare(ctx, t, w, bob, answerCode)
	if err != nil {
		t.Fatalf("bob pairing with the answer share's code: %v", err)
	}
	ac := answerer.channel(ctx, t, w, "shared")
	t.Run("answer mode answers the prompt", func(t *testing.T) {
		if _, err := pb.NewAgentServiceClient(ac).AnswerPermission(ctx, &pb.AnswerPermissionRequest{SessionId: sid,
			Response: &pb.PermissionResponse{RequestId: reqID, Decision: pb.PermissionDecision_ALLOW_ONCE}}); err != nil {
			t.Fatalf("an answer-mode teammate's AnswerPermission: %v", err)
		}
		if _, _, err := followSession(t, ctx, api, sid).next(ctx, 0, func(ev *pb.AgentEvent) bool { return ev.GetTurnComplete() != nil }); err != nil {
			t.Fatalf("the turn after the teammate's answer: %v", err)
		}
		if _, err := os.Stat(filepath.Join(a.project, fakeapi.ToolFile)); err != nil {
			t.Errorf("the tool the teammate allowed did not run: %v", err)
		}
	})
	t.Run("unshare cuts the teammate within a second", func(t *testing.T) {
		ended := watchEnd(ctx, t, ac)
		start := time.Now()
		resp, err := pb.NewShareServiceClient(local).RevokeShare(ctx, &pb.RevokeShareRequest{ShareId: answerID})
		if err != nil || resp.ChannelsClosed != 1 {
			t.Fatalf("RevokeShare: %v %v", resp, err)
		}
		d := ended().Sub(start)
		t.Logf("unshare cut the teammate's open stream %s after the call", d)
		if d > time.Second {
			t.Errorf("the teammate's stream ended %s after unshare, want <= 1s", d)
		}
		_, err = pb.NewSessionServiceClient(answerer.channel(ctx, t, w, "shared")).GetSession(ctx, &pb.GetSessionRequest{SessionId: sid})
		if err == nil {
			t.Error("a call through a new channel after unshare succeeded")
		}
	})
	t.Run("an expired share is cut and refused", func(t *testing.T) {
		code, id := shareCode(ctx, t, a, sid, "--with", "bob", "--until", "4s")
		var expires time.Time
		list, err := pb.NewShareServiceClient(local).ListShares(ctx, &pb.ListSharesRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Shares {
			if s.Id == id {
				expires = s.ExpiresAt.AsTime()
			}
		}
		d, err := pairShare(ctx, t, w, bob, code)
		if err != nil {
			t.Fatalf("pairing with a short share's code: %v", err)
		}
		cc := d.channel(ctx, t, w, "shared")
		ended := watchEnd(ctx, t, cc)
		late := ended().Sub(expires)
		t.Logf("the expired share's open stream ended %s after its expiry", late)
		if late > time.Second {
			t.Errorf("the expired share's stream ended %s after its expiry, want <= 1s", late)
		}
		_, err = pb.NewSessionServiceClient(d.channel(ctx, t, w, "shared")).GetSession(ctx, &pb.GetSessionRequest{SessionId: sid})
		if err == nil {
			t.Error("a call through a new channel after the share expired succeeded")
		}
	})
	out, err := (&device{env: cleanEnv()}).run(ctx, t, "", "--agent", "unix://"+a.sock, "session", "shares", sid)
	if err != nil || strings.Count(out, "sh-") != 4 || !strings.Contains(out, "revoked") || !strings.Contains(out, "active") {
		t.Errorf("betcode session shares: %v\n%s", err, out)
	}
	// The read-only teammate's channel is still open: betcode session unshare closes it.
	if _, err := rapi.ListSessions(ctx, &pb.ListSessionsRequest{}); err != nil {
		t.Fatalf("the read-only teammate before unshare: %v", err)
	}
	out, err = (&device{env: cleanEnv()}).run(ctx, t, "", "--agent", "unix://"+a.sock, "session", "unshare", readID)
	if err != nil || !strings.Contains(out, "1 open channel(s) closed") {
		t.Errorf("betcode session unshare: %v\n%s", err, out)
	}
}
