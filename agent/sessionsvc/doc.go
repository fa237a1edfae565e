// Package sessionsvc serves SessionService (proto/betcode/v1/session.proto,
// adapted from the "obey" session RPCs): managed sessions with a status
// state machine, a provider chosen per session, SendMessage streaming
// SessionActivityEvents, WatchSession / WatchAllSessions, StopSession and
// RestartSession, and errors carrying BETCODE-NNNN codes.
//
// It is a view over the session.Manager, not a second store: every
// AgentService session is a managed session too (and the other way round),
// driven by either service. What SessionService adds (task id, token budget,
// timeout, restart count, stopped/failed marks, start and end times) lives
// in the session's metadata under "betcode.managed.".
//
// Status of a session, derived where it can be:
//
//	CREATED -> STARTING -> RUNNING <-> WORKING
//	                          |           |
//	                          +-> STOPPING -> STOPPED
//	STARTING -> FAILED (the provider could not start)
//
// CREATED, STARTING and STOPPING are held while CreateSession or
// StopSession runs; WORKING is "a turn runs" (whoever sent it), RUNNING "no
// turn runs"; STOPPED and FAILED are marks stored with the session. A
// stopped session that another client (AgentService) sends a message to is
// reopened: STOPPED -> WORKING.
//
// Status changes go through one table (hub), fed by the service's own
// transitions and by the manager's change feed (session.Manager.Watch), so
// that every watcher sees each transition once and in order.
package sessionsvc
