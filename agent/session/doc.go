// Package session owns the agent's conversations: for each session it runs
// the session's provider (package provider; the Claude Code CLI is the one
// whose output it can read so far) when needed, translates its output to
// AgentEvents,
// gives every event the next per-session sequence number, persists it to the
// event log and, only once it is durable, fans it out to every watching
// client.
//
// Flow of one event:
//
//	CLI stdout -> claude.Conn -> bridge.Translator -> emit (seq, time)
//	  -> eventlog.Append (batched, async) -> commit -> publish -> subscribers
//
// A user message the CLI accepts is itself an event (user_input, without
// attachment bytes), sequenced before anything its turn produces, so that
// a replay shows the prompts as well as the answers.
//
// Subscribers have bounded buffers. Publishing never blocks: a subscriber
// whose buffer is full is cut off with ErrSlowConsumer and can resume from the
// last sequence it received. Replay reads the log up to the point where the
// subscriber joined and takes the rest from its live buffer, deduplicating by
// sequence, so a client that attaches at any moment sees every event exactly
// once.
//
// Besides each session's event stream, the Manager keeps a change feed of
// session states (Watch, behind WatchSessions): publishing an event that
// changes what a session list shows (session_info, status, usage, a prompt,
// turn end, error, user input), resolving a prompt, a rename and a deletion
// each offer a whole SessionUpdate to every watcher, without blocking. A
// watcher whose bounded buffer fills is cut off with a *WatchOverflowError
// and watches again from a fresh snapshot; updates carry whole states, so
// nothing else is needed to catch up.
package session
