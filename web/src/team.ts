// A session's team (docs/web-api.md, "Teams"): its teammates and tasks, read over REST from the
// agent's TeamService. The WebSocket sends no teammate messages, so a session's Team panel
// re-reads both when the session's stream says they may have changed (an Agent/Task tool call or
// its result, a subagent's item, the todo list, the end of a turn), at most once a second, and
// every 5 s while a teammate is still at work (a SubagentService teammate streams in its own
// session, not in this one).

import { ApiError, get } from './api';
import { changed, streamHooks } from './store';
import type { StreamEvent, Teammate, TeamTask } from './types';

export interface Team {
  teammates: Teammate[];
  tasks: TeamTask[];
  loaded: boolean;
  /** The agent has no TeamService (501): the app shows the streamed todo list instead. */
  unsupported: boolean;
  error: string;
  v: number;
}

interface Sync { watchers: number; inflight: boolean; again: boolean; last: number; timer?: ReturnType<typeof setTimeout> }

/** At most one re-read per session per MIN_GAP ms. */
export const MIN_GAP = 1000;
/** Re-read period while a teammate is not stopped. */
export const POLL = 5000;

const teams = new Map<string, Team>();
const syncs = new Map<string, Sync>();
/** Tool call ids of Agent/Task calls seen per session: their results end a teammate. */
const teamTools = new Map<string, Set<string>>();

export function team(sid: string): Team {
  let t = teams.get(sid);
  if (!t) teams.set(sid, (t = { teammates: [], tasks: [], loaded: false, unsupported: false, error: '', v: 0 }));
  return t;
}

/** Claude Code's subagent tool: Task, renamed Agent in later releases. */
export const isTeamTool = (name: unknown) => name === 'Task' || name === 'Agent';

/** Whether a streamed item of a session may change its teammates or tasks. */
export function touchesTeam(m: StreamEvent, tools: Set<string>): boolean {
  switch (m.type) {
    case 'task_sync':
    case 'turn_complete':
      return true;
    case 'tool_call':
      if (isTeamTool(m.toolName)) {
        tools.add(String(m.toolId));
        return true;
      }
      break;
    case 'tool_result':
      if (tools.has(String(m.toolId))) return true;
  }
  return typeof m.parentToolUseId === 'string' && m.parentToolUseId !== '';
}

/** Whether a teammate is still at work (the panel then polls). */
export const anyActive = (t: Team) => t.teammates.some((m) => m.status !== 'stopped');

streamHooks.add((m) => {
  const sid = m.sessionId;
  if (!sid) return;
  let tools = teamTools.get(sid);
  if (!tools) teamTools.set(sid, (tools = new Set()));
  if (touchesTeam(m, tools) && syncs.get(sid)?.watchers) refreshTeam(sid);
});

/** Re-reads a session's teammates and tasks: now, or after MIN_GAP since the last read. */
export function refreshTeam(sid: string) {
  const s = syncs.get(sid);
  if (!s) return;
  if (s.inflight) {
    s.again = true;
    return;
  }
  const wait = s.last + MIN_GAP - Date.now();
  if (wait > 0) {
    s.timer ??= setTimeout(() => {
      s.timer = undefined;
      refreshTeam(sid);
    }, wait);
    return;
  }
  s.inflight = true;
  s.last = Date.now();
  const base = `/sessions/${encodeURIComponent(sid)}`;
  const t = team(sid);
  Promise.all([get<Teammate[]>(base + '/teammates'), get<TeamTask[]>(base + '/tasks')])
    .then(([mates, tasks]) => {
      t.teammates = mates || [];
      t.tasks = tasks || [];
      t.loaded = true;
      t.unsupported = false;
      t.error = '';
    })
    .catch((e) => {
      if (e instanceof ApiError && e.status === 501) {
        t.unsupported = true;
        t.loaded = true;
      } else t.error = (e as Error).message || String(e);
    })
    .finally(() => {
      t.v++;
      s.inflight = false;
      changed();
      if (s.again && s.watchers) {
        s.again = false;
        refreshTeam(sid);
      }
    });
}

/** A panel shows the session's team: read it now, then keep it fresh until the returned stop. */
export function watchTeam(sid: string): () => void {
  let s = syncs.get(sid);
  if (!s) syncs.set(sid, (s = { watchers: 0, inflight: false, again: false, last: 0 }));
  const sync = s;
  sync.watchers++;
  refreshTeam(sid);
  const poll = setInterval(() => {
    if (anyActive(team(sid))) refreshTeam(sid);
  }, POLL);
  return () => {
    clearInterval(poll);
    if (--sync.watchers === 0) {
      clearTimeout(sync.timer);
      sync.timer = undefined;
      sync.again = false;
    }
  };
}

export interface TaskRow { task: TeamTask; owner: string; blockedBy: string[] }

/** Tasks with their owner's name and the subjects of the tasks they wait for. */
export function taskRows(t: Pick<Team, 'teammates' | 'tasks'>): TaskRow[] {
  const names = new Map(t.teammates.map((m) => [m.agentId, m.name || m.agentType || m.agentId]));
  const subjects = new Map(t.tasks.map((x) => [x.id, x.subject]));
  return t.tasks.map((task) => ({
    task,
    owner: task.assignedAgentId ? names.get(task.assignedAgentId) || task.assignedAgentId : '',
    blockedBy: (task.blockedBy || []).map((id) => subjects.get(id) || id),
  }));
}

/** A teammate's status as shown: ccgrid's status, with how a stopped subagent ended. */
export function statusLabel(m: Teammate): string {
  if (m.status === 'stopped' && m.subagentStatus && m.subagentStatus !== 'completed') return `stopped (${m.subagentStatus.replace(/_/g, ' ')})`;
  if (m.status === 'stopped' && m.error) return 'stopped (failed)';
  return m.status;
}
