package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
)

// OpenFile is the notifier's file of open prompts in the agent's data
// directory (Options.OpenFile).
const OpenFile = "push-open.json"

// KindResolved is the payload type of the message that withdraws a
// prompt's notification once the prompt is resolved (answered on any
// device or the CLI, decided by a rule, timed out, or withdrawn with its
// turn): the service worker closes the notification with its tag and
// shows nothing (docs/web-api.md, "Push notifications"). It is no kind a
// subscription chooses: it goes where the prompt's notification went.
const KindResolved = "resolved"

// remember records a notified prompt as open until an update shows it
// resolved.
func (n *Notifier) remember(e event) {
	n.open.Add(e.n.SessionID, e.n.RequestID, e)
	n.openDirty = true
}

// withdraw sends the resolutions of prompts, which an update or a
// snapshot showed resolved (and n.open no longer holds).
func (n *Notifier) withdraw(ctx context.Context, prompts []event) {
	for _, e := range prompts {
		n.resolve(ctx, e)
		n.openDirty = true
	}
}

// openPrompt is an open prompt as OpenFile keeps it.
type openPrompt struct {
	N       Notification `json:"n"`
	Key     string       `json:"key"`
	Urgency string       `json:"urgency"`
}

// loadOpen reads OpenFile, if set and present.
func (n *Notifier) loadOpen() error {
	if n.opt.OpenFile == "" {
		return nil
	}
	b, err := os.ReadFile(n.opt.OpenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("push: read the open prompts: %w", err)
	}
	var saved []openPrompt
	if err := json.Unmarshal(b, &saved); err != nil {
		// Only resolutions are lost: start afresh.
		n.opt.Log.Warn("push: unreadable open prompts, starting with none", "file", n.opt.OpenFile, "err", err)
		return nil
	}
	for _, p := range saved {
		n.remember(event{n: p.N, key: p.Key, urgency: p.Urgency})
	}
	n.openDirty = false
	return nil
}

// saveOpen writes OpenFile (0600) if the open prompts changed.
func (n *Notifier) saveOpen() {
	if n.opt.OpenFile == "" || !n.openDirty {
		return
	}
	saved := []openPrompt{}
	for _, prompts := range n.open {
		for _, e := range prompts {
			// What a resolution needs, not the prompt's text.
			p := openPrompt{N: e.n, Key: e.key, Urgency: e.urgency}
			p.N.Title, p.N.Body, p.N.URL = "", "", ""
			saved = append(saved, p)
		}
	}
	b, err := json.Marshal(saved)
	if err == nil {
		err = atomicfile.Write(n.opt.OpenFile, b, 0o600)
	}
	if err != nil {
		n.opt.Log.Warn("push: save the open prompts", "file", n.opt.OpenFile, "err", err)
		return
	}
	n.openDirty = false
}

// resolve sends the "resolved" message of prompt e: its tag, and the same
// RFC 8030 topic, so that a push service still holding the prompt's
// message for an offline browser replaces it with this one.
func (n *Notifier) resolve(ctx context.Context, e event) {
	r := Notification{Type: KindResolved, MachineID: e.n.MachineID, SessionID: e.n.SessionID, RequestID: e.n.RequestID, Tag: e.n.Tag}
	n.notify(ctx, event{n: r, key: KindResolved + "/" + e.key, urgency: "high", prompt: e.n.Type})
}
