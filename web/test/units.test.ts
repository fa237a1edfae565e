// Unit tests of the pure modules: markdown sanitizing, line diffs, the highlighter.
// Run: npm test (bundled by Vite in SSR mode, run by node's test runner).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { editsOf, lineDiff, parseUnified } from '../src/diff';
import { highlight } from '../src/highlight';
import { renderMarkdown } from '../src/markdown';

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
