// A tiny mock of docs/web-api.md for manual checks of the web app (npm run mock; then npm run dev
// and open http://127.0.0.1:5173, token "dev"). NOT used by CI tests: the real API is shared/webapi.
//
// MOCK_ROLE=agent|relay (default relay), MOCK_TOKEN (default dev), MOCK_PORT (default 7820),
// MOCK_STATIC=dir serves a built app (e.g. ../shared/webui/dist) on the same port.
// A prompt containing "ask" adds a question ("ask multi": two in one call), "flood" streams 5,000 text deltas at ~1,000/s,
// ("flood md": a 60 KB markdown answer at the same rate), "todo" sends a todo list, "team" runs a Task tool subagent;
// every turn asks permission for a Bash call.
import { createServer } from 'node:http';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { extname, join, normalize } from 'node:path';
import { WebSocketServer } from 'ws';

const ROLE = process.env.MOCK_ROLE || 'relay';
const TOKEN = process.env.MOCK_TOKEN || 'dev';
const PORT = Number(process.env.MOCK_PORT || 7820);
const STATIC = process.env.MOCK_STATIC;
const now = () => new Date().toISOString();

const machines = ROLE === 'agent'
  ? [{ id: 'local', name: 'this machine', online: true, current: true }]
  : [
      { id: 'm1', name: 'laptop', online: true, current: true, owner: 'alice' },
      { id: 'm2', name: 'workstation', online: false, current: false, lastSeen: new Date(Date.now() - 7200e3).toISOString() },
    ];
let rules = [{ id: 'r1', toolName: 'Bash', pathPattern: 'go test *', behavior: 'allow', rule: 'Bash(go test *)', source: 'settings' }];
const pushSubs = [];
let teammateSpecs = [];
let skillSpecs = [];
const sessions = new Map(); // id → { s: Session, events: [], waiters: Map }
let nextId = 1;

function newSession(cwd, name, prompt, provider) {
  const id = 's' + nextId++;
  const s = {
    id, name: name || '', cwd, model: 'sonnet', status: 'completed', agentStatus: 'idle', costUsd: 0, inputTokens: 0,
    outputTokens: 0, messageCount: 0, lastMessage: prompt || '', pendingPrompts: 0, pending: [], createdAt: now(), updatedAt: now(),
    provider: !provider || provider === 'claude' ? 'claude-code' : provider,
  };
  const rec = { s, events: [], waiters: new Map(), cancelled: false };
  sessions.set(id, rec);
  return rec;
}

const clients = new Set(); // { ws, subs: Set<sessionId> }
const send = (c, m) => c.ws.readyState === 1 && c.ws.send(JSON.stringify(m));
const broadcast = (m) => clients.forEach((c) => c.authed && send(c, m));

function emit(rec, ev) {
  const e = { ...ev, sessionId: rec.s.id, seq: rec.events.length + 1, ts: now() };
  rec.events.push(e);
  clients.forEach((c) => c.subs.has(rec.s.id) && send(c, e));
  return e;
}
function update(rec, patch) {
  Object.assign(rec.s, patch, { updatedAt: now() });
  broadcast({ type: 'session_updated', session: rec.s });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function waitAnswer(rec, id) {
  return new Promise((resolve) => rec.waiters.set(id, resolve));
}

// "flood md": a long markdown answer (about 60 KB: headings, paragraphs, lists, code blocks).
function floodMarkdown() {
  let out = '';
  for (let i = 0; out.length < 60000; i++) {
    out += `## Part ${i}\n\nThe **function** \`f${i}\` reads the [config](https://example.com/${i}) and returns an error when a key is missing; ` +
      'it is called by the server on every request, so it must not allocate. '.repeat(4) + '\n\n';
    out += `- first point of ${i}\n- second point with \`code\`\n- third point\n\n`;
    out += '```go\n' + Array.from({ length: 12 }, (_, j) => `func f${i}_${j}(x int) int { return x * ${j} } // "line ${j}"`).join('\n') + '\n```\n\n';
  }
  return out;
}

async function turn(rec, prompt) {
  rec.cancelled = false;
  update(rec, { status: 'running', agentStatus: 'thinking', lastMessage: prompt, messageCount: rec.s.messageCount + 1 });
  emit(rec, { type: 'agent_status', status: 'thinking', message: 'Thinking' });
  emit(rec, { type: 'session_info', model: 'sonnet', cwd: rec.s.cwd, isResumed: false, isCompacted: false, contextUsagePercent: 12 });
  const text = prompt.includes('flood md')
    ? floodMarkdown()
    : prompt.includes('flood')
    ? 'flood '.repeat(5000)
    : `## Plan\n\nI will **run the tests** and fix \`what fails\`.\n\n- step one\n- step two <script>alert("xss")</script> <img src=x onerror=alert(1)>\n\n` +
      '```go\n// Add returns a+b.\nfunc Add(a, b int) int {\n\treturn a + b // "sum"\n}\n```\n\n[docs](https://example.com) and [bad](javascript:alert(1))\n';
  // ~1,000 deltas/s for "flood" (several per timer tick), else a readable trickle.
  const step = prompt.includes('flood md') ? 12 : prompt.includes('flood') ? 6 : 3;
  const rate = prompt.includes('flood') ? 1000 : 300;
  const t0 = Date.now();
  for (let i = 0, n = 0; i < text.length; i += step, n++) {
    if (rec.cancelled) return finish(rec, 'cancelled');
    emit(rec, { type: 'lead_output', text: text.slice(i, i + step), complete: i + step >= text.length });
    if (n >= ((Date.now() - t0) * rate) / 1000) await sleep(1);
  }
  if (prompt.includes('todo')) {
    emit(rec, { type: 'task_sync', tasks: [
      { id: '1', subject: 'Run the tests', activeForm: 'Running the tests', status: 'completed' },
      { id: '2', subject: 'Fix the failure', activeForm: 'Fixing the failure', status: 'in_progress' },
      { id: '3', subject: 'Commit', activeForm: 'Committing', status: 'pending' },
    ] });
  }
  if (prompt.includes('team')) {
    // A Task tool subagent: its items carry parentToolUseId; its result ends it.
    const id = 'task' + rec.events.length;
    emit(rec, { type: 'tool_call', toolId: id, toolName: 'Task', input: { description: 'Find the flaky test', prompt: 'Find which test is flaky', subagent_type: 'general-purpose' }, description: 'Find the flaky test' });
    for (const w of ['Reading ', 'the test ', 'logs…']) {
      await sleep(800);
      emit(rec, { type: 'lead_output', text: w, complete: false, parentToolUseId: id });
    }
    emit(rec, { type: 'tool_result', toolId: id, output: 'TestReload is flaky: it races the reconnect.', isError: false, durationMs: 2400 });
  }
  emit(rec, { type: 'tool_call', toolId: 't' + rec.events.length, toolName: 'Bash', input: { command: 'touch hello.txt && ls -la' }, description: 'Create hello.txt' });
  const toolId = rec.events[rec.events.length - 1].toolId;
  const req = emit(rec, { type: 'permission_request', requestId: 'p' + rec.events.length, toolName: 'Bash', input: { command: 'touch hello.txt && ls -la' }, description: 'Create hello.txt', suggestions: [], toolUseId: toolId });
  update(rec, { status: 'waiting', agentStatus: 'waiting_for_user', pendingPrompts: 1, pending: [req] });
  const ans = await waitAnswer(rec, req.requestId);
  broadcast({ type: 'permission_resolved', sessionId: rec.s.id, requestId: req.requestId });
  update(rec, { status: 'running', agentStatus: 'executing_tool', pendingPrompts: 0, pending: [] });
  if (rec.cancelled) return finish(rec, 'cancelled');
  emit(rec, ans.behavior === 'deny'
    ? { type: 'tool_result', toolId, output: 'Permission denied' + (ans.message ? ': ' + ans.message : ''), isError: true, durationMs: 3 }
    : { type: 'tool_result', toolId, output: 'total 8\n-rw-r--r-- 1 me me 0 hello.txt\n', isError: false, durationMs: 41 });
  emit(rec, { type: 'tool_call', toolId: 'e' + rec.events.length, toolName: 'Edit', input: { file_path: rec.s.cwd + '/main.go', old_string: 'package main\n\nfunc main() {\n\tprintln("hi")\n}', new_string: 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello")\n}' }, description: 'Edit main.go' });
  emit(rec, { type: 'tool_result', toolId: rec.events[rec.events.length - 1].toolId, output: 'The file was updated.', isError: false, durationMs: 5 });
  if (prompt.includes('ask')) {
    // One AskUserQuestion call: one event per question, all with one questionId ("ask multi": two
    // questions, the second a multi-select one). The answer must carry all of them at once.
    const qid = 'q' + rec.events.length;
    const q = emit(rec, { type: 'question', questionId: qid, question: 'Which database?', multiSelect: false, options: [
      { value: 'pg', label: 'PostgreSQL', description: 'The server one' }, { value: 'sqlite', label: 'SQLite', description: 'A file' },
    ] });
    const pending = [q];
    if (prompt.includes('multi')) {
      pending.push(emit(rec, { type: 'question', questionId: qid, question: 'Which extras?', multiSelect: true, options: [
        { value: 'cache', label: 'Cache', description: '' }, { value: 'metrics', label: 'Metrics', description: '' }, { value: 'tracing', label: 'Tracing', description: '' },
      ] }));
    }
    update(rec, { status: 'waiting', agentStatus: 'waiting_for_user', pendingPrompts: 1, pending });
    const a = await waitAnswer(rec, q.questionId);
    broadcast({ type: 'permission_resolved', sessionId: rec.s.id, requestId: q.questionId });
    update(rec, { status: 'running', agentStatus: 'thinking', pendingPrompts: 0, pending: [] });
    emit(rec, { type: 'lead_output', text: `You chose ${JSON.stringify(a.answers)}.`, complete: true });
  }
  emit(rec, { type: 'lead_output', text: '\nDone: `hello.txt` exists.', complete: true });
  finish(rec, 'end_turn');
}

function finish(rec, stopReason) {
  const cost = rec.s.costUsd + 0.0123;
  emit(rec, { type: 'usage', inputTokens: 1200, outputTokens: 340, cacheReadTokens: 0, cacheCreationTokens: 0, costUsd: 0.0123, model: 'sonnet', durationMs: 4200 });
  emit(rec, { type: 'turn_complete', stopReason });
  emit(rec, { type: 'agent_status', status: 'idle', message: '' });
  update(rec, { status: 'completed', agentStatus: 'idle', costUsd: cost, inputTokens: rec.s.inputTokens + 1200, outputTokens: rec.s.outputTokens + 340, lastStopReason: stopReason, pendingPrompts: 0, pending: [] });
  broadcast({ type: 'cost_update', sessionId: rec.s.id, costUsd: cost, inputTokens: rec.s.inputTokens, outputTokens: rec.s.outputTokens });
}

// seed
{
  const a = newSession('/home/alice/src/betcode', 'Fix the flaky test', 'fix the flaky test');
  a.events.push({ type: 'lead_output', sessionId: a.s.id, seq: 1, ts: now(), text: 'Earlier work: **all green**.', complete: true });
  a.events.push({ type: 'turn_complete', sessionId: a.s.id, seq: 2, ts: now(), stopReason: 'end_turn' });
  a.s.messageCount = 2;
  a.s.lastMessage = 'Earlier work: all green.';
  a.s.costUsd = 0.42;
  newSession('/home/alice/src/website', '', 'update the landing page');
}

function answerPerm(rec, requestId, body) {
  const w = rec.waiters.get(requestId);
  if (!w) return false;
  rec.waiters.delete(requestId);
  w(body);
  return true;
}

// ---------------------------------------------------------------- HTTP

const json = (res, status, body) => {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(body === undefined ? '' : JSON.stringify(body));
};
const fail = (res, status, code, error) => json(res, status, { error, code });
const readBody = (req) => new Promise((r) => { let b = ''; req.on('data', (c) => (b += c)); req.on('end', () => { try { r(b ? JSON.parse(b) : {}); } catch { r({}); } }); });

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png', '.webmanifest': 'application/manifest+json' };

const server = createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const p = url.pathname;
  if (!p.startsWith('/api/')) {
    if (!STATIC) return fail(res, 404, 'NOT_FOUND', 'not found');
    let f = normalize(join(STATIC, p));
    if (!f.startsWith(normalize(STATIC)) || !existsSync(f) || statSync(f).isDirectory()) f = join(STATIC, 'index.html');
    const gz = (req.headers['accept-encoding'] || '').includes('gzip') && existsSync(f + '.gz');
    res.writeHead(200, { 'Content-Type': TYPES[extname(f)] || 'application/octet-stream', ...(gz ? { 'Content-Encoding': 'gzip' } : {}), 'Cache-Control': p.startsWith('/assets/') ? 'max-age=31536000, immutable' : 'no-cache' });
    return res.end(readFileSync(gz ? f + '.gz' : f));
  }
  if (p === '/api/health') return json(res, 200, { status: 'ok', timestamp: now(), version: 'mock', role: ROLE });
  if (p === '/api/info') return json(res, 200, { role: ROLE, version: 'mock-0.1', push: ROLE === 'relay', vapidPublicKey: ROLE === 'relay' ? 'BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U' : undefined });
  if (req.headers.authorization !== 'Bearer ' + TOKEN) return fail(res, 401, 'UNAUTHENTICATED', 'bad token');
  const body = req.method === 'GET' ? {} : await readBody(req);
  let m;
  const rec = (id) => sessions.get(id);
  if (p === '/api/me') return json(res, 200, { userId: 'u1', displayName: 'Alice' });
  if (p === '/api/machines') return json(res, 200, machines);
  if ((m = p.match(/^\/api\/machines\/([^/]+)\/switch$/))) {
    const mc = machines.find((x) => x.id === m[1]);
    if (!mc) return fail(res, 404, 'MACHINE_NOT_FOUND', 'no such machine');
    machines.forEach((x) => (x.current = x === mc));
    return json(res, 200, mc);
  }
  if (p === '/api/sessions' && req.method === 'GET') return json(res, 200, [...sessions.values()].map((r) => r.s).sort((a, b) => b.pendingPrompts - a.pendingPrompts || b.updatedAt.localeCompare(a.updatedAt)));
  if (p === '/api/sessions' && req.method === 'POST') {
    if (!body.cwd) return fail(res, 400, 'INVALID_ARGUMENT', 'cwd is required');
    const r = newSession(body.cwd, body.name, body.prompt, body.provider);
    broadcast({ type: 'session_created', session: r.s });
    if (body.prompt) setTimeout(() => turn(r, body.prompt), 300);
    return json(res, 201, r.s);
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)$/))) {
    const r = rec(m[1]);
    if (!r) return fail(res, 404, 'SESSION_NOT_FOUND', 'no such session');
    if (req.method === 'DELETE') { sessions.delete(m[1]); broadcast({ type: 'session_deleted', sessionId: m[1] }); return json(res, 204); }
    if (req.method === 'PATCH') {
      if (typeof body.name !== 'string') return fail(res, 400, 'INVALID_ARGUMENT', 'name is required');
      update(r, { name: body.name.trim() });
      return json(res, 200, r.s);
    }
    return json(res, 200, r.s);
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/(messages|continue)$/))) {
    const r = rec(m[1]);
    if (!r) return fail(res, 404, 'SESSION_NOT_FOUND', 'no such session');
    turn(r, body.prompt || '');
    return json(res, 202, { sequence: r.events.length, duplicate: false });
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/stop$/))) { const r = rec(m[1]); if (r) r.cancelled = true; return json(res, 200, r?.s); }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/permissions\/([^/]+)$/))) {
    const r = rec(m[1]);
    if (!r || !answerPerm(r, m[2], body)) return fail(res, 409, 'PERMISSION_NOT_PENDING', 'not pending');
    return json(res, 200, { sequence: r.events.length });
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/questions\/([^/]+)$/))) {
    const r = rec(m[1]);
    if (!r || !answerPerm(r, m[2], body)) return fail(res, 409, 'PERMISSION_NOT_PENDING', 'not pending');
    return json(res, 200, { sequence: r.events.length });
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/events$/))) {
    const r = rec(m[1]);
    const after = Number(url.searchParams.get('after') || 0);
    return json(res, 200, (r?.events || []).filter((e) => e.seq > after).slice(0, 1000));
  }
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/changes$/))) return json(res, 200, { isGitRepo: true, branch: 'main', root: rec(m[1])?.s.cwd || '/', truncated: false, files: [
    { path: 'main.go', status: 'modified', additions: 3, deletions: 1, binary: false, staged: false },
    { path: 'hello.txt', status: 'added', additions: 0, deletions: 0, binary: false, staged: true },
    { path: 'logo.png', status: 'modified', additions: 0, deletions: 0, binary: true, staged: false },
  ] });
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/diff$/))) return json(res, 200, { path: url.searchParams.get('path'), binary: url.searchParams.get('path') === 'logo.png', truncated: false,
    diff: 'diff --git a/main.go b/main.go\nindex 1..2 100644\n--- a/main.go\n+++ b/main.go\n@@ -1,5 +1,7 @@\n package main\n \n+import "fmt"\n+\n func main() {\n-\tprintln("hi")\n+\tfmt.Println("hello")\n }\n' });
  if ((m = p.match(/^\/api\/sessions\/([^/]+)\/(teammates|tasks)$/))) {
    const r = rec(m[1]);
    if (!r) return json(res, 404, { error: 'no such session', code: 'SESSION_NOT_FOUND' });
    if (m[2] === 'tasks') return json(res, 200, (r.events.findLast((e) => e.type === 'task_sync')?.tasks || []).map((t) => ({ ...t, blocks: [], blockedBy: [] })));
    return json(res, 200, r.events.filter((e) => e.type === 'tool_call' && e.toolName === 'Task').map((c) => {
      const done = r.events.find((e) => e.type === 'tool_result' && e.toolId === c.toolId);
      const text = r.events.filter((e) => e.parentToolUseId === c.toolId && e.type === 'lead_output').map((e) => e.text).join('');
      return { agentId: c.toolId, sessionId: m[1], name: c.input.description, agentType: c.input.subagent_type, status: done ? 'stopped' : 'working',
        output: done ? done.output : text, kind: 'task_tool', prompt: c.input.prompt, createdAt: c.ts };
    }));
  }
  if (p === '/api/teammate-specs' && req.method === 'GET') return json(res, 200, teammateSpecs);
  if (p === '/api/skill-specs' && req.method === 'GET') return json(res, 200, skillSpecs);
  if (p === '/api/teammate-specs' && req.method === 'POST') {
    if (!body.name) return json(res, 400, { error: 'a teammate spec needs a name', code: 'INVALID_ARGUMENT' });
    if (teammateSpecs.some((x) => x.name === body.name)) return json(res, 409, { error: 'the name is taken', code: 'ALREADY_EXISTS' });
    const x = { id: 'spec-' + Date.now(), name: body.name, role: body.role || '', instructions: body.instructions, skillIds: body.skillIds || [], createdAt: now() };
    teammateSpecs = [...teammateSpecs, x];
    return json(res, 201, x);
  }
  if (p === '/api/skill-specs' && req.method === 'POST') {
    if (!body.name || !['official', 'external', 'internal'].includes(body.skillType)) return json(res, 400, { error: 'name and skillType are required', code: 'INVALID_ARGUMENT' });
    if (skillSpecs.some((x) => x.name === body.name)) return json(res, 409, { error: 'the name is taken', code: 'ALREADY_EXISTS' });
    const x = { id: 'skill-' + Date.now(), name: body.name, description: body.description || '', skillType: body.skillType, skillMdContent: body.skillMdContent, pluginName: body.pluginName, createdAt: now() };
    skillSpecs = [...skillSpecs, x];
    return json(res, 201, x);
  }
  if ((m = p.match(/^\/api\/teammate-specs\/([^/]+)$/)) && req.method === 'DELETE') { teammateSpecs = teammateSpecs.filter((x) => x.id !== m[1]); return json(res, 204); }
  if ((m = p.match(/^\/api\/skill-specs\/([^/]+)$/)) && req.method === 'DELETE') {
    const user = teammateSpecs.find((x) => x.skillIds.includes(m[1]));
    if (user) return json(res, 409, { error: `teammate spec ${user.name} uses it`, code: 'FAILED_PRECONDITION' });
    skillSpecs = skillSpecs.filter((x) => x.id !== m[1]);
    return json(res, 204);
  }
  if (p === '/api/permission-rules' && req.method === 'GET') return json(res, 200, rules);
  if (p === '/api/permission-rules' && req.method === 'POST') {
    const r = { id: 'r' + Date.now(), toolName: body.toolName, pathPattern: body.pathPattern, behavior: body.behavior, rule: body.toolName + (body.pathPattern ? `(${body.pathPattern})` : ''), source: 'web' };
    rules = [...rules, r];
    broadcast({ type: 'permission_rules_updated', rules });
    return json(res, 201, r);
  }
  if ((m = p.match(/^\/api\/permission-rules\/([^/]+)$/))) { rules = rules.filter((r) => r.id !== m[1]); broadcast({ type: 'permission_rules_updated', rules }); return json(res, 204); }
  if (p === '/api/usage') {
    const ss = [...sessions.values()].map((r) => ({ id: r.s.id, name: r.s.name, inputTokens: r.s.inputTokens, outputTokens: r.s.outputTokens, costUsd: r.s.costUsd }));
    return json(res, 200, { total: ss.reduce((t, s) => ({ inputTokens: t.inputTokens + s.inputTokens, outputTokens: t.outputTokens + s.outputTokens, costUsd: t.costUsd + s.costUsd }), { inputTokens: 0, outputTokens: 0, costUsd: 0 }), sessions: ss });
  }
  if (p === '/api/dirs') {
    const path = url.searchParams.get('path') || '/home/alice';
    return json(res, 200, { path, parent: path.replace(/\/[^/]+$/, '') || '/', directories: ['src', 'notes'].map((d) => path + '/' + d), entries: [{ name: 'src', path: path + '/src', isGitRepo: false }, { name: 'betcode', path: path + '/betcode', isGitRepo: true }], truncated: false });
  }
  if (p === '/api/dirs/validate') {
    const path = url.searchParams.get('path') || '';
    return json(res, 200, path.startsWith('/') ? { valid: true, path, isGitRepo: path.includes('betcode') } : { valid: false, path, isGitRepo: false, error: 'not an absolute path' });
  }
  if (p === '/api/local-sessions') return json(res, 200, [{ sessionId: 'cc-123', workingDirectory: '/home/alice/src/tool', updatedAt: now(), messageCount: 14, firstPrompt: 'refactor the parser', lastMessagePreview: 'Done refactoring.', adopted: false }]);
  if ((m = p.match(/^\/api\/local-sessions\/([^/]+)\/adopt$/))) {
    const r = newSession('/home/alice/src/tool', 'refactor the parser', 'refactor the parser');
    broadcast({ type: 'session_created', session: r.s });
    return json(res, 200, r.s);
  }
  if (ROLE === 'relay' && p === '/api/push') return json(res, 200, { enabled: true, vapidPublicKey: 'x', subscriptions: pushSubs });
  if (ROLE === 'relay' && p === '/api/push/subscriptions') {
    const s = { id: 'ps' + Date.now(), endpointHost: new URL(body.endpoint || 'https://push.example').host, name: body.name || '', createdAt: now() };
    pushSubs.push(s);
    return json(res, 201, s);
  }
  if (ROLE === 'relay' && p === '/api/push/test') { pushSubs.forEach((s) => Object.assign(s, { lastStatus: 'sent', lastAt: now() })); return json(res, 202, {}); }
  return fail(res, 404, 'NOT_FOUND', 'not found: ' + p);
});

const wss = new WebSocketServer({ server, path: '/api/ws' });
wss.on('connection', (ws) => {
  const c = { ws, subs: new Set(), authed: false };
  clients.add(c);
  const t = setTimeout(() => ws.close(4401), 10000);
  ws.on('close', () => clients.delete(c));
  ws.on('message', (data) => {
    let m;
    try { m = JSON.parse(String(data)); } catch { return send(c, { type: 'error', code: 'INVALID_ARGUMENT', message: 'malformed JSON' }); }
    if (!c.authed) {
      clearTimeout(t);
      if (m.type !== 'hello' || m.token !== TOKEN) { send(c, { type: 'error', code: 'UNAUTHENTICATED', message: 'bad token' }); return ws.close(4401); }
      c.authed = true;
      send(c, { type: 'snapshot', sessions: [...sessions.values()].map((r) => r.s), permissionRules: rules, machine: machines[0] });
      for (const s of m.subscriptions || []) subscribe(c, s.sessionId, s.afterSequence || 0);
      return;
    }
    const r = sessions.get(m.sessionId);
    const ack = () => m.id && send(c, { type: 'ack', id: m.id });
    const err = (code, message) => send(c, { type: 'error', id: m.id, sessionId: m.sessionId, code, message });
    switch (m.type) {
      case 'ping': return send(c, { type: 'pong', id: m.id });
      case 'subscribe': subscribe(c, m.sessionId, m.afterSequence || 0); return ack();
      case 'unsubscribe': c.subs.delete(m.sessionId); return ack();
      case 'user_message': if (!r) return err('SESSION_NOT_FOUND', 'no such session'); ack(); turn(r, m.text || ''); return;
      case 'cancel': if (r) { r.cancelled = true; for (const [id, w] of r.waiters) { r.waiters.delete(id); w({ behavior: 'deny' }); } } return ack();
      case 'permission_response':
      case 'question_response':
        if (!r || !answerPerm(r, m.requestId || m.questionId, m)) return err('PERMISSION_NOT_PENDING', 'not pending');
        return ack();
      default: return err('INVALID_ARGUMENT', 'unknown type ' + m.type);
    }
  });
});

function subscribe(c, sid, after) {
  const r = sessions.get(sid);
  if (!r) return send(c, { type: 'subscription_ended', sessionId: sid, code: 'SESSION_NOT_FOUND', message: 'no such session' });
  for (const e of r.events) if (e.seq > after) send(c, e);
  send(c, { type: 'replay_done', sessionId: sid, seq: r.events.length });
  c.subs.add(sid);
}

server.listen(PORT, '127.0.0.1', () => console.log(`mock BetCode API (${ROLE}) on http://127.0.0.1:${PORT}, token "${TOKEN}"${STATIC ? ', serving ' + STATIC : ''}`));
