// The inbox's model (src/inbox.ts): what waits on the user across machines, newest first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Session, StreamEvent } from '../src/types';

// The store marks changes for the next frame; a hidden "document" settles them on a timer.
(globalThis as { document?: unknown }).document ??= { visibilityState: 'hidden' };
const { feedSynthetic, inboxItems, markSeen } = await import('../src/inbox');
const { state } = await import('../src/store');

const sess = (id: string, at: string, o: Partial<Session> = {}): Session => ({
  id, name: id, cwd: '/p', model: 'm', status: 'completed', agentStatus: 'idle', costUsd: 0, inputTokens: 0, outputTokens: 0,
  messageCount: 2, lastMessage: '', pendingPrompts: 0, createdAt: at, updatedAt: at, ...o,
});
const ev = (o: Record<string, unknown>) => o as StreamEvent;

test('inbox: prompts, questions grouped by id, failed and unseen finished turns, newest first', () => {
  state.pairings = [
    { machineId: 'a', machineName: 'Alpha' }, { machineId: 'b', machineName: 'Beta' },
  ] as typeof state.pairings;
  feedSynthetic([
    {
      machineId: 'a',
      sessions: [
        sess('s1', '2026-01-01T10:00:00Z', {
          status: 'waiting', pendingPrompts: 1,
          pending: [ev({ type: 'permission_request', requestId: 'r1', toolName: 'Bash', ts: '2026-01-01T10:00:01Z' })],
        }),
        sess('s2', '2026-01-01T09:00:00Z', { status: 'error' }),
      ],
    },
    {
      machineId: 'b',
      sessions: [
        sess('s3', '2026-01-01T11:00:00Z', {
          status: 'waiting', pendingPrompts: 2,
          pending: [
            ev({ type: 'question', questionId: 'q1', question: 'Which?', options: [{ label: 'X' }], ts: '2026-01-01T11:00:02Z' }),
            ev({ type: 'question', questionId: 'q1', question: 'And?', options: [{ label: 'Y' }], ts: '2026-01-01T11:00:02Z' }),
          ],
        }),
        sess('s4', '2026-01-01T08:00:00Z'),
        sess('s5', '2026-01-01T12:00:00Z', { status: 'running' }), // busy: nothing waits yet
      ],
    },
  ]);
  const items = inboxItems();
  assert.deepEqual(items.map((i) => `${i.kind} ${i.id}`), [
    'question b/s3/q1', 'permission a/s1/r1', 'error a/s2/error', 'done b/s4/done',
  ]);
  assert.equal(items[0].machineName, 'Beta');
  assert.deepEqual(items[0].questions?.map((q) => q.question), ['Which?', 'And?']);
  assert.equal(items[1].toolName, 'Bash');

  // Seen as of its last change: gone; a later change makes it news again.
  markSeen('b', 's4', '2026-01-01T08:00:00Z');
  assert.ok(!inboxItems().some((i) => i.id === 'b/s4/done'));
  feedSynthetic([{ machineId: 'b', sessions: [sess('s4', '2026-01-01T13:00:00Z')] }]);
  assert.deepEqual(inboxItems().map((i) => i.id), ['b/s4/done']);
});
