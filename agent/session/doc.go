// Package session owns the agent's conversations: for each session it runs
// the Claude Code CLI when needed, translates its output to AgentEvents,
// gives every event the next per-session sequence number, persists it to the
// event log and, only once it is durable, fans it out to every watching
// client.
//
// Flow of one event:
//
//	CLI stdout -> claude.Conn -> bridge.Translator -> emit (seq, time)
//	  -> eventlog.Append (batched, async) -> commit -> publish -> subscribers
//
// Subscribers have bounded buffers. Publishing never blocks: a subscriber
// whose buffer is full is cut off with ErrSlowConsumer and can resume from the
// last sequence it received. Replay reads the log up to the point where the
// subscriber joined and takes the rest from its live buffer, deduplicating by
// sequence, so a client that attaches at any moment sees every event exactly
// once.
package session
