package channelsvc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// eventSocket is the browser's /api/ws inside a channel: a real WebSocket
// of the channel's web API (served in memory), whose messages travel as
// ws frames.
type eventSocket struct {
	w    *webChannel
	in   chan string   // the browser's messages, to the socket
	stop chan struct{} // closed by closeEvents
	once sync.Once
	done chan struct{} // closed when its goroutines ended and ws.close went out
}

// openEvents opens the event socket (ws.open); one open before is closed
// first, its ws.close sent before the new one's messages.
func (w *webChannel) openEvents(subs json.RawMessage) {
	w.closeEvents()
	w.mu.Lock()
	if !w.httpRun {
		w.httpRun = true
		w.httpDone = make(chan struct{})
		go func() {
			defer close(w.httpDone) // serveWeb closes w.http, then waits
			_ = w.http.Serve(w.pipe)
		}()
	}
	ev := &eventSocket{w: w, in: make(chan string, 64), stop: make(chan struct{}), done: make(chan struct{})}
	w.events = ev
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(ev.done)
		ev.run(subs)
	}()
}

// closeEvents closes the event socket (ws.close), if one is open, and
// waits until its ws.close frame went out.
func (w *webChannel) closeEvents() {
	w.mu.Lock()
	ev := w.events
	w.events = nil
	w.mu.Unlock()
	if ev == nil {
		return
	}
	ev.once.Do(func() { close(ev.stop) })
	<-ev.done
}

// stopped reports whether the browser closed the socket (closeEvents).
func (ev *eventSocket) stopped() bool {
	select {
	case <-ev.stop:
		return true
	default:
		return false
	}
}

// send queues a browser message for the socket.
func (ev *eventSocket) send(data string) {
	select {
	case ev.in <- data:
	case <-ev.done:
	case <-ev.w.ctx.Done():
	}
}

// run dials the web API's /api/ws, says hello as the device, and relays
// messages both ways until the socket, the browser or the channel ends it;
// then it sends ws.close.
func (ev *eventSocket) run(subs json.RawMessage) {
	w := ev.w
	code, reason := websocket.StatusNormalClosure, ""
	defer func() {
		if code != websocket.StatusNormalClosure {
			w.log.Info("web channel: the event socket closed", "code", int(code), "reason", reason)
		}
		w.sendFrame(webFrame{T: "ws.close", Code: int(code), Reason: &reason})
	}()
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return w.pipe.dial(ctx, w.c.LocalAddr(), w.c.RemoteAddr())
		},
	}}
	defer client.CloseIdleConnections()
	c, _, err := websocket.Dial(ctx, "ws://channel/api/ws", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		code, reason = websocket.StatusInternalError, "the machine's event socket did not open"
		w.log.Warn("web channel: open the event socket", "err", err)
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(MaxWebFrame - 1024)
	hello := map[string]any{"type": "hello", "token": channelToken}
	if len(subs) > 0 {
		hello["subscriptions"] = subs
	}
	b, _ := json.Marshal(hello)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		code, reason = websocket.StatusInternalError, "the machine's event socket failed"
		return
	}
	// The writer: the browser's messages to the socket, until stop.
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for {
			select {
			case m := <-ev.in:
				wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
				err := c.Write(wctx, websocket.MessageText, []byte(m))
				wcancel()
				if err != nil {
					// The socket is broken (or the machine's side stopped
					// reading for 20 s): end the reader too, or nobody
					// would act on stop and the channel would wait for
					// this socket forever.
					c.CloseNow()
					return
				}
			case <-ev.stop:
				_ = c.Close(websocket.StatusNormalClosure, "")
				return
			case <-ctx.Done():
				c.CloseNow() // ends the reader below
				return
			}
		}
	}()
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			var ce websocket.CloseError
			switch {
			case ev.stopped():
				// The browser closed the socket (ws.close): however the
				// close handshake raced this read, it ended normally.
			case errors.As(err, &ce):
				code, reason = ce.Code, ce.Reason
			default:
				code, reason = websocket.StatusGoingAway, "the channel ended"
				w.log.Info("web channel: reading the event socket failed", "err", err)
			}
			break
		}
		s := string(data)
		if !w.sendFrame(webFrame{T: "ws", Data: &s}) {
			break
		}
	}
	cancel()
	c.CloseNow()
	<-writerDone
}
