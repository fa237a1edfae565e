// Package claude runs the Claude Code CLI as a subprocess in stream-json
// mode and speaks its NDJSON protocol: one JSON object per line on stdin and
// stdout (see ../shared/reference/claude-stream-json.md in the project's
// spec folder).
//
// The package is split in two layers:
//
//   - Conn is the protocol codec over any reader/writer pair. It decodes
//     stdout lines into Envelopes (tolerating garbage: bad lines are counted
//     and logged, never fatal) and serialises every stdin line itself, so a
//     malformed line can never reach the CLI (one bad line kills it).
//   - Process spawns the real binary with the flags a host daemon needs,
//     wires a Conn to its pipes, drains stderr concurrently and stops the
//     child gracefully (end_session, then SIGTERM, then SIGKILL).
package claude
