// Unit tests of the pure modules: markdown sanitizing, line diffs, the highlighter, the grouping
// of AskUserQuestion events, incremental markdown blocks, the team panel's model.
// Run: npm test (bundled by Vite in SSR mode, run by node's test runner).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { editsOf, lineDiff, parseUnified } from '../src/diff';
import { highlight } from '../src/highlight';
import { renderMarkdown } from '../src/markdown';
import { frameBegin } from '../src/frame';
import { advance, BLOCK, newMd, parseChunks, tailSrc } from '../src/mdstream';
import { addAsk, buildAnswers, choose, parseAnswered, type Ask } from '../src/questions';
import { groupQuestion, reconnectDelay, RESUBSCRIBE_TRIES, resubscribeDelay, type Item, type QuestionItem } from '../src/store';
import { delay, pollSSO, type DevicePoll } from '../src/sso';
import { DEFAULT_PROVIDER, PROVIDERS, providerBadge, providerLabel } from '../src/providers';
import { MIN_GAP, refreshTeam, statusLabel, taskRows, team, touchesTeam, watchTeam } from '../src/team';
import type { Teammate } from '../src/types';
import './e2ee.test'; // web/src/e2ee against Go's vectors
import './api.test'; // api.ts: machine calls through a paired machine's channel
import './voice.test'; // ui/VoiceButton.tsx: dictated text into a box
import './share.test'; // e2ee/channel.ts: a share code pairs with the user's own login
import './inbox.test'; // inbox.ts: what waits on the user across machines

test('markdown escapes raw HTML', () => {
  const h = renderMarkdown('hi <script>alert(1)</script> <img src=x onerror=alert(1)>\n\n<div onclick="x()">block</div>');
  assert.ok(!/<script|<img|<div/i.test(h), h);
  assert.ok(h.includes('&lt;script&gt;'), h);
});

test('markdown drops unsafe link targets and keeps safe ones', () => {
  const h = renderMarkdown('[a](javascript:alert(1)) [b](https://example.com "t") [c](data:text/html,x) ![i](https://x/y.png) [d](vbscript:x)');
  assert.ok(!/href="(javascript|data|vbscript):/i.test(h), h);
  assert.ok(h.includes('href="https://example.com"') && h.includes('rel="noopener noreferrer nofollow"'), h);
  assert.ok(!h.includes('<img'), h);
});

test('markdown code blocks are highlighted and escaped', () => {
  const h = renderMarkdown('```go\nfunc f() string { return "<b>" } // x\n```');
  assert.ok(h.includes('<span class="t-kw">func</span>'), h);
  assert.ok(h.includes('&lt;b&gt;') && !h.includes('<b>'), h);
  assert.ok(h.includes('<span class="t-com">// x</span>'), h);
});

test('markdown code blocks can be scrolled from the keyboard: focusable and named', () => {
  assert.ok(renderMarkdown('```go\nx\n```').startsWith('<pre class="code" data-lang="go" tabindex="0" role="group" aria-label="Code, go">'));
  assert.ok(renderMarkdown('```\nx\n```').startsWith('<pre class="code" tabindex="0" role="group" aria-label="Code">'));
  assert.ok(renderMarkdown('```"><b>\nx\n```').includes('aria-label="Code, &quot;&gt;&lt;b&gt;"'));
  const t = renderMarkdown('| a | b |\n| - | - |\n| 1 | <i>2</i> |');
  assert.ok(t.startsWith('<div class="table" tabindex="0" role="group" aria-label="Table"><table>'), t);
  assert.ok(t.includes('<td>1</td>') && t.includes('&lt;i&gt;2&lt;/i&gt;') && /<\/table>\s*<\/div>$/.test(t.trim()), t);
});

test('highlight leaves unknown languages escaped', () => {
  assert.equal(highlight('<a> & "b"', 'nope'), '&lt;a&gt; &amp; &quot;b&quot;');
});

test('lineDiff shows removals before additions with context', () => {
  const d = lineDiff('a\nb\nc', 'a\nB\nc');
  assert.deepEqual(d, [
    { t: ' ', s: 'a' },
    { t: '-', s: 'b' },
    { t: '+', s: 'B' },
    { t: ' ', s: 'c' },
  ]);
});

test('lineDiff collapses long unchanged runs', () => {
  const a = Array.from({ length: 20 }, (_, i) => 'l' + i).join('\n');
  const b = a.replace('l10', 'X');
  const d = lineDiff(a, b);
  assert.equal(d.filter((l) => l.t === '@').length, 2);
  assert.equal(d.filter((l) => l.t === ' ').length, 6);
});

test('editsOf handles Edit, MultiEdit and Write', () => {
  assert.equal(editsOf('Bash', { command: 'ls' }), null);
  assert.equal(editsOf('Edit', { file_path: '/x', old_string: 'a', new_string: 'b' })!.path, '/x');
  const m = editsOf('MultiEdit', { file_path: '/y', edits: [{ old_string: 'a', new_string: 'b' }, { old_string: 'c', new_string: '' }] })!;
  assert.ok(m.lines.some((l) => l.t === '@' && l.s === 'edit 2'));
  assert.deepEqual(editsOf('Write', { file_path: '/z', content: 'x\ny' })!.lines, [{ t: '+', s: 'x' }, { t: '+', s: 'y' }]);
});

test('parseUnified classifies lines', () => {
  const d = parseUnified('--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+new\n ctx\n');
  assert.deepEqual(d.map((l) => l.t), ['@', '@', '@', '-', '+', ' ']);
});

const dbQ = { type: 'question', questionId: 'q1', question: 'Which database?', multiSelect: false,
  options: [{ value: 'pg', label: 'PostgreSQL' }, { value: 'sqlite', label: 'SQLite' }] };
const exQ = { type: 'question', questionId: 'q1', question: 'Which extras?', multiSelect: true,
  options: [{ value: 'cache', label: 'Cache' }, { value: 'metrics', label: 'Metrics' }, { value: 'tracing', label: 'Tracing' }] };

test('question events with one questionId make one card', () => {
  const items: Item[] = [];
  groupQuestion(items, { ...dbQ, seq: 5 }, '5', true);
  groupQuestion(items, { ...exQ, seq: 6 }, '6', true);
  assert.equal(items.length, 1);
  const q = items[0] as QuestionItem;
  assert.equal(q.key, '5');
  assert.deepEqual(q.questions.map((a) => a.question), ['Which database?', 'Which extras?']);
  assert.equal(q.questions[1].multiSelect, true);
  // The same question again (REST and socket, or a replay) is not added twice.
  groupQuestion(items, { ...exQ, seq: 7 }, '7', true);
  assert.equal((items[0] as QuestionItem).questions.length, 2);
  // Another call's question starts a new card.
  groupQuestion(items, { ...dbQ, questionId: 'q2', seq: 8 }, '8', true);
  assert.equal(items.length, 2);
  assert.equal((items[1] as QuestionItem).questionId, 'q2');
});

test('a grouped question card answers every question at once', () => {
  const g: Ask[] = [];
  addAsk(g, dbQ);
  addAsk(g, exQ);
  let chosen: string[][] = [];
  chosen = choose(chosen, 0, 'SQLite', false);
  assert.equal(buildAnswers(g, chosen), null, 'not until every question has an answer');
  chosen = choose(chosen, 1, 'Tracing', true);
  chosen = choose(chosen, 1, 'Cache', true);
  chosen = choose(chosen, 1, 'Metrics', true);
  chosen = choose(chosen, 1, 'Metrics', true); // unticked again
  chosen = choose(chosen, 0, 'PostgreSQL', false); // a radio replaces
  // Labels, multi-select in the options' order joined with ", ".
  assert.deepEqual(buildAnswers(g, chosen), { 'Which database?': 'PostgreSQL', 'Which extras?': 'Cache, Tracing' });
  assert.deepEqual(parseAnswered(JSON.stringify(buildAnswers(g, chosen))), { 'Which database?': 'PostgreSQL', 'Which extras?': 'Cache, Tracing' });
  assert.equal(parseAnswered('SQLite'), 'SQLite');
  assert.equal(parseAnswered(undefined), undefined);
});

test('options without a label answer with their value', () => {
  const g: Ask[] = [];
  addAsk(g, { question: 'Go?', options: [{ value: 'yes', label: '' }], multiSelect: false });
  assert.deepEqual(buildAnswers(g, [['yes']]), { 'Go?': 'yes' });
});

test('streamed markdown is cut into blocks parsed once; the tail stays small', () => {
  const para = 'word '.repeat(100).trim();
  const text = Array.from({ length: 20 }, (_, i) => `## H${i}\n\n${para}\n\n`).join('');
  const s = newMd();
  // Fed in small pieces, as deltas arrive.
  for (let n = 7; n < text.length; n += 7) advance(s, text.slice(0, n));
  advance(s, text);
  assert.ok(s.chunks.length >= 20, String(s.chunks.length));
  assert.equal(s.chunks.map((c) => c.src).join('') + tailSrc(s, text), text);
  assert.ok(tailSrc(s, text).length <= BLOCK, 'tail ' + tailSrc(s, text).length);
  while (parseChunks(s) < s.chunks.length) frameBegin();
  assert.ok(s.chunks[1].html!.includes('<p>word word'), s.chunks[1].html);
});

test('a huge code block is cut inside its fence and reopened with its language', () => {
  const code = Array.from({ length: 400 }, (_, i) => `let x${i} = "${i}"; // c`).join('\n');
  const text = 'Intro\n\n```js\n' + code + '\n```\n\nAfter\n';
  const s = newMd();
  advance(s, text);
  const inFence = s.chunks.filter((c) => c.src.startsWith('```js\n'));
  assert.ok(inFence.length >= 3, String(inFence.length));
  for (const c of s.chunks.slice(1, -1)) assert.ok(c.src.endsWith('```\n'), JSON.stringify(c.src.slice(-20)));
  assert.ok(s.chunks.slice(2).every((c) => c.cont), 'blocks cut inside the fence continue it');
  while (parseChunks(s) < s.chunks.length) frameBegin(); // a frame's budget at a time
  for (const c of inFence) assert.ok(c.html!.startsWith('<pre class="code" data-lang="js" '), c.html!.slice(0, 60));
  // Every code line shows exactly once.
  const all = s.chunks.map((c) => c.html).join('') + tailSrc(s, text);
  assert.equal((all.match(/x\d+ = /g) || []).length, 400);
});

test('one huge line is cut at a space', () => {
  const text = 'flood '.repeat(2000);
  const s = newMd();
  for (let n = 6; n <= text.length; n += 6) advance(s, text.slice(0, n));
  assert.ok(s.chunks.length > 3);
  assert.ok(s.chunks.slice(1).every((c) => c.cont));
  assert.equal(s.chunks.map((c) => c.src).join('') + tailSrc(s, text), text);
});

test('single sign-on polls at the interval, slows down, and returns the token', async () => {
  const waits: number[] = [];
  const answers: DevicePoll[] = [{ status: 'pending', interval: 5 }, { status: 'slow_down' }, { status: 'slow_down', interval: 12 }, { token: 'bct_x', userId: 'alice' }];
  const flows: string[] = [];
  const token = await pollSSO(
    { flow: 'f1', userCode: 'ABCD-EFGH', verificationUri: 'https://idp/device', interval: 5, expiresIn: 600 },
    undefined,
    async (flow) => (flows.push(flow), answers.shift()!),
    async (ms) => void waits.push(ms),
  );
  assert.equal(token, 'bct_x');
  assert.deepEqual(waits, [5000, 5000, 10000, 12000]);
  assert.deepEqual(flows, ['f1', 'f1', 'f1', 'f1']);
});

test('single sign-on stops on the relay refusing and on cancel', async () => {
  const d = { flow: 'f', userCode: 'C', verificationUri: 'u', interval: 1, expiresIn: 60 };
  const denied = Object.assign(new Error('denied'), { status: 403, code: 'ACCESS_DENIED' });
  await assert.rejects(pollSSO(d, undefined, async () => Promise.reject(denied), async () => {}), denied);
  const ac = new AbortController();
  const p = pollSSO(d, ac.signal, async () => ({ status: 'pending' }), delay);
  ac.abort();
  await assert.rejects(p, { name: 'AbortError' });
});

test('providers: Claude Code is the default and gets no badge; the others do', () => {
  assert.equal(PROVIDERS[0][0], DEFAULT_PROVIDER);
  assert.ok(PROVIDERS.some(([v]) => v === 'codex'));
  for (const p of [undefined, '', 'claude-code', 'claude']) assert.equal(providerBadge(p), null, String(p));
  assert.equal(providerBadge('codex'), 'Codex');
  assert.equal(providerBadge('openai-api'), 'OpenAI API');
  assert.equal(providerBadge('acp'), 'ACP agent');
  assert.equal(providerBadge('some-new-one'), 'some-new-one');
  assert.equal(providerLabel(undefined), 'Claude Code');
});

test('team: the events that may change a session\'s teammates or tasks', () => {
  const tools = new Set<string>();
  const ev = (type: string, more: Record<string, unknown> = {}) => ({ type, sessionId: 's', ...more });
  assert.ok(touchesTeam(ev('tool_call', { toolId: 't1', toolName: 'Task' }), tools));
  assert.ok(touchesTeam(ev('tool_call', { toolId: 't2', toolName: 'Agent' }), tools));
  assert.ok(!touchesTeam(ev('tool_call', { toolId: 't3', toolName: 'Bash' }), tools));
  assert.ok(touchesTeam(ev('tool_result', { toolId: 't1' }), tools), 'the end of a Task call');
  assert.ok(!touchesTeam(ev('tool_result', { toolId: 't3' }), tools), 'the end of a Bash call');
  assert.ok(touchesTeam(ev('lead_output', { text: 'x', parentToolUseId: 't2' }), tools), 'a subagent\'s item');
  assert.ok(!touchesTeam(ev('lead_output', { text: 'x' }), tools));
  assert.ok(touchesTeam(ev('task_sync', { tasks: [] }), tools));
  assert.ok(touchesTeam(ev('turn_complete'), tools));
  assert.ok(!touchesTeam(ev('usage'), tools));
});

test('team: tasks show their owner\'s name and what blocks them', () => {
  const mate = (agentId: string, name: string): Teammate => ({ agentId, sessionId: 's', name, agentType: 'subagent', status: 'working', output: '', kind: 'subagent' });
  const rows = taskRows({
    teammates: [mate('a1', 'researcher')],
    tasks: [
      { id: 'o/1', subject: 'research', status: 'completed', assignedAgentId: 'a1', blocks: ['o/2'], blockedBy: [] },
      { id: 'o/2', subject: 'build', status: 'pending', assignedAgentId: 'a9', blocks: [], blockedBy: ['o/1', 'gone'] },
      { id: '3', subject: 'todo', status: 'in_progress', blocks: [], blockedBy: [] },
    ],
  });
  assert.deepEqual(rows.map((r) => [r.owner, r.blockedBy]), [['researcher', []], ['a9', ['research', 'gone']], ['', []]]);
  const m = mate('a1', 'x');
  assert.equal(statusLabel({ ...m, status: 'stopped', subagentStatus: 'completed' }), 'stopped');
  assert.equal(statusLabel({ ...m, status: 'stopped', subagentStatus: 'failed' }), 'stopped (failed)');
  assert.equal(statusLabel({ ...m, status: 'idle' }), 'idle');
});

test('team: re-read at most once per MIN_GAP, and an agent without TeamService is remembered', async () => {
  const g = globalThis as unknown as Record<string, unknown>;
  const saved = { fetch: g.fetch, document: g.document };
  const calls: string[] = [];
  let status = 200;
  g.document = { visibilityState: 'hidden' };
  g.fetch = async (url: string) => {
    calls.push(url);
    return new Response(status === 200 ? (url.endsWith('/tasks') ? '[]' : '[{"agentId":"a","status":"working"}]') : '{"error":"no","code":"UNIMPLEMENTED"}', { status });
  };
  const settle = () => new Promise((r) => setTimeout(r, 20));
  try {
    const stop = watchTeam('sx');
    await settle();
    assert.deepEqual(calls, ['/api/sessions/sx/teammates', '/api/sessions/sx/tasks']);
    assert.equal(team('sx').teammates.length, 1);
    refreshTeam('sx');
    refreshTeam('sx');
    await settle();
    assert.equal(calls.length, 2, 'no second read within MIN_GAP');
    status = 501;
    await new Promise((r) => setTimeout(r, MIN_GAP));
    assert.equal(calls.length, 4, 'one read after MIN_GAP');
    assert.ok(team('sx').unsupported);
    stop();
  } finally {
    g.fetch = saved.fetch;
    g.document = saved.document;
  }
});

test('a subscription ended by a moving machine is asked again; a final end is not', () => {
  const mid = () => 0.5; // no jitter
  // The relay's hint first: the machine is moving between replicas.
  assert.equal(resubscribeDelay('MACHINE_OFFLINE', 100, 0, mid), 100);
  assert.equal(resubscribeDelay('UNAVAILABLE', 120000, 0, mid), 30000);
  // Else 250 ms doubling to 8 s.
  assert.deepEqual([0, 1, 2, 5, 6, 7].map((n) => resubscribeDelay('TUNNEL_DISCONNECTED', undefined, n, mid)), [250, 500, 1000, 8000, 8000, 8000]);
  for (const code of ['RELAY_DRAINING', 'SLOW_CONSUMER', 'DEADLINE_EXCEEDED']) assert.equal(resubscribeDelay(code, undefined, 0, mid), 250, code);
  // Jitter: ±25 %.
  assert.equal(resubscribeDelay('UNAVAILABLE', undefined, 0, () => 0), 187.5);
  assert.equal(resubscribeDelay('UNAVAILABLE', undefined, 0, () => 1), 312.5);
  // Spent, or final: shown with a Resubscribe button.
  assert.equal(resubscribeDelay('UNAVAILABLE', 100, RESUBSCRIBE_TRIES, mid), undefined);
  for (const code of ['SESSION_NOT_FOUND', 'PERMISSION_DENIED', 'INVALID_ARGUMENT', 'MACHINE_NOT_FOUND', '', undefined]) {
    assert.equal(resubscribeDelay(code, 100, 0, mid), undefined, String(code));
  }
});

test('the event socket comes back when the relay says, else on its backoff', () => {
  const mid = () => 0.5;
  assert.equal(reconnectDelay(3, 100, mid), 100); // the relay's hint wins over the backoff
  assert.equal(reconnectDelay(0, 90000, mid), 30000);
  assert.deepEqual([0, 1, 2, 3, 5, 6, 20].map((n) => reconnectDelay(n, undefined, mid)), [100, 200, 400, 800, 3200, 5000, 5000]);
  assert.equal(reconnectDelay(0, undefined, () => 0), 75);
});
