package push

// KindResolved is the payload type that withdraws a prompt's notification
// once the prompt is resolved (answered, timed out, withdrawn with its
// turn, or its session deleted): the service worker closes the
// notification with its tag and shows nothing (docs/web-api.md,
// "Notifications that clear"). It goes to the subscriptions that wanted
// the prompt; the relay cannot tell which device answered, so the one that
// did gets it too (its notification is closed already).
const KindResolved = "resolved"

// withdraw queues the resolutions of prompts, which an update or a
// snapshot showed resolved.
func (s *Service) withdraw(machineID string, prompts []event) {
	for _, e := range prompts {
		s.resolve(machineID, e)
	}
}

// resolve queues prompt e's withdrawal: its tag and topic, high urgency,
// once per subscription (the store's claim of "resolved/" and its key).
func (s *Service) resolve(machineID string, e event) {
	r := Notification{Type: KindResolved, MachineID: e.n.MachineID, SessionID: e.n.SessionID, RequestID: e.n.RequestID, Tag: e.n.Tag}
	s.notify(machineID, event{n: r, createdBy: e.createdBy, key: KindResolved + "/" + e.key, urgency: e.urgency, prompt: e.n.Type})
}
