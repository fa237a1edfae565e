import { Component } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { statusLabel, taskRows, team, watchTeam, type TaskRow } from '../team';
import type { Task, Teammate } from '../types';
import { ScrollPre } from './common';

interface Props { session: string; v: number; todos: Task[] }

/**
 * The session's team between the conversation and the composer: teammates (name, type, status,
 * last output; each expandable) and tasks (status, owner, what blocks them). Collapsed at first,
 * its summary says how far the team is. On an agent without TeamService, the streamed todo list.
 */
export function TeamPanel({ session, todos }: { session: string; todos: Task[] }) {
  useEffect(() => watchTeam(session), [session]);
  return <TeamView session={session} v={team(session).v} todos={todos} />;
}

/** Re-renders only when the team (v) or the streamed todo list changed. */
class TeamView extends Component<Props> {
  shouldComponentUpdate(n: Props) {
    return n.v !== this.props.v || n.session !== this.props.session || n.todos !== this.props.todos;
  }
  render({ session, todos }: Props) {
    const t = team(session);
    if (!t.loaded || t.unsupported) return todos.length ? <Todos tasks={todos} /> : null;
    if (!t.teammates.length && !t.tasks.length) return null;
    const working = t.teammates.filter((m) => m.status !== 'stopped').length;
    const done = t.tasks.filter((x) => x.status === 'completed').length;
    const parts = [];
    if (t.teammates.length) parts.push(`${t.teammates.length} teammate${t.teammates.length > 1 ? 's' : ''}${working ? `, ${working} at work` : ''}`);
    if (t.tasks.length) parts.push(`tasks ${done}/${t.tasks.length}`);
    return (
      <details class="team" data-testid="team-panel">
        <summary>
          Team <span class="muted">· {parts.join(' · ')}</span>
        </summary>
        {t.error && <p class="error small">Not refreshed: {t.error}</p>}
        {t.teammates.length > 0 && (
          <ul class="mates" aria-label="Teammates">
            {t.teammates.map((m) => (
              <li key={m.agentId}>
                <Mate m={m} />
              </li>
            ))}
          </ul>
        )}
        {t.tasks.length > 0 && (
          <ul class="team-tasks" aria-label="Tasks">
            {taskRows(t).map((r) => (
              <TaskLine key={r.task.id} r={r} />
            ))}
          </ul>
        )}
      </details>
    );
  }
}

const lastLine = (s: string) => s.trim().split('\n').pop()?.slice(0, 160) || '';

function Mate({ m }: { m: Teammate }) {
  const [open, setOpen] = useState(false);
  const label = statusLabel(m);
  const failed = label !== m.status;
  const name = m.name || m.agentType || m.agentId;
  return (
    <details class="mate" data-testid="teammate" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        <span class="mate-head">
          <span class="muted" aria-hidden="true">{open ? '▾' : '▸'}</span>
          <span class="row-title">{name}</span>
          <span class="muted small">{m.agentType}</span>
          <span class={`chip st-${failed ? 'error' : m.status}`} data-testid="teammate-status">{label}</span>
        </span>
        {!open && m.output && <span class="muted small ellipsis block">{lastLine(m.output)}</span>}
      </summary>
      {open && (
        <div class="mate-body">
          {m.error && <p class="error small">{m.error}</p>}
          {m.output ? (
            <ScrollPre class="code out mate-out" label={`Output of ${name}`} testid="teammate-output">{m.output}</ScrollPre>
          ) : (
            <p class="muted small">No output yet.</p>
          )}
          {m.prompt && (
            <p class="muted small">
              <span class="sr-only">Prompt: </span>
              {m.prompt.slice(0, 400)}
            </p>
          )}
        </div>
      )}
    </details>
  );
}

const MARK: Record<Task['status'], string> = { completed: '☑', in_progress: '◐', pending: '☐' };
const ENDED = new Set(['failed', 'skipped', 'cancelled']);

function TaskLine({ r }: { r: TaskRow }) {
  const x = r.task;
  return (
    <li class={'todo ' + x.status} data-testid="team-task">
      <span aria-hidden="true">{MARK[x.status] || '☐'}</span> <span class="sr-only">{x.status.replace('_', ' ')}: </span>
      <span class="task-subject">{x.subject}</span>
      {x.stepStatus && ENDED.has(x.stepStatus) && <span class="chip st-error">{x.stepStatus}</span>}
      {r.owner && <span class="muted small"> · {r.owner}</span>}
      {r.blockedBy.length > 0 && x.status !== 'completed' && <span class="muted small block">blocked by {r.blockedBy.join(', ')}</span>}
    </li>
  );
}

/** The streamed todo list (task_sync), for agents without TeamService. */
export function Todos({ tasks }: { tasks: Task[] }) {
  const done = tasks.filter((t) => t.status === 'completed').length;
  const now = tasks.find((t) => t.status === 'in_progress');
  return (
    <details class="todos" data-testid="todo-list">
      <summary>
        Tasks {done}/{tasks.length}
        {now && <span class="muted"> · {now.activeForm || now.subject}</span>}
      </summary>
      <ul aria-label="Tasks">
        {tasks.map((t) => (
          <li key={t.id} class={'todo ' + t.status}>
            <span aria-hidden="true">{MARK[t.status]}</span> <span class="sr-only">{t.status.replace('_', ' ')}: </span>
            {t.status === 'in_progress' && t.activeForm ? t.activeForm : t.subject}
          </li>
        ))}
      </ul>
    </details>
  );
}
