// Line diffs for Edit / Write / MultiEdit inputs and parsing of unified diffs for display.

export type DiffLine = { t: ' ' | '+' | '-' | '@'; s: string };

/** A line diff of a and b (LCS); falls back to all-removed/all-added when too large. */
export function lineDiff(a: string, b: string): DiffLine[] {
  const A = a === '' ? [] : a.split('\n');
  const B = b === '' ? [] : b.split('\n');
  let pre = 0;
  while (pre < A.length && pre < B.length && A[pre] === B[pre]) pre++;
  let suf = 0;
  while (suf < A.length - pre && suf < B.length - pre && A[A.length - 1 - suf] === B[B.length - 1 - suf]) suf++;
  const a2 = A.slice(pre, A.length - suf);
  const b2 = B.slice(pre, B.length - suf);
  const out: DiffLine[] = A.slice(0, pre).map((s) => ({ t: ' ', s }));
  const n = a2.length;
  const m = b2.length;
  if (n * m > 4_000_000) {
    a2.forEach((s) => out.push({ t: '-', s }));
    b2.forEach((s) => out.push({ t: '+', s }));
  } else {
    // dp[i][j]: LCS length of a2[i:] and b2[j:]
    const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--) dp[i][j] = a2[i] === b2[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a2[i] === b2[j]) {
        out.push({ t: ' ', s: a2[i] });
        i++;
        j++;
      } else if (i < n && (j === m || dp[i + 1][j] >= dp[i][j + 1])) out.push({ t: '-', s: a2[i++] });
      else out.push({ t: '+', s: b2[j++] });
    }
  }
  A.slice(A.length - suf).forEach((s) => out.push({ t: ' ', s }));
  return collapse(out);
}

/** Keeps 3 lines of context around changes; longer unchanged runs become an "@" marker. */
function collapse(lines: DiffLine[], ctx = 3): DiffLine[] {
  const keep = lines.map(() => false);
  lines.forEach((l, i) => {
    if (l.t !== ' ') for (let k = Math.max(0, i - ctx); k <= Math.min(lines.length - 1, i + ctx); k++) keep[k] = true;
  });
  const out: DiffLine[] = [];
  let skipped = 0;
  lines.forEach((l, i) => {
    if (keep[i]) {
      if (skipped) out.push({ t: '@', s: `… ${skipped} unchanged line${skipped > 1 ? 's' : ''}` });
      skipped = 0;
      out.push(l);
    } else skipped++;
  });
  if (skipped) out.push({ t: '@', s: `… ${skipped} unchanged line${skipped > 1 ? 's' : ''}` });
  return out;
}

/** Classifies the lines of a unified diff (git diff output). */
export function parseUnified(diff: string): DiffLine[] {
  return diff.replace(/\n$/, '').split('\n').map((s) => {
    if (s.startsWith('+++') || s.startsWith('---') || s.startsWith('diff ') || s.startsWith('index ')) return { t: '@', s };
    if (s.startsWith('@@')) return { t: '@', s };
    if (s.startsWith('+')) return { t: '+', s: s.slice(1) };
    if (s.startsWith('-')) return { t: '-', s: s.slice(1) };
    return { t: ' ', s: s.startsWith(' ') ? s.slice(1) : s };
  });
}

/** The edits of an Edit / MultiEdit / Write tool input, or null for other tools. */
export function editsOf(toolName: string, input: Record<string, unknown>): { path: string; lines: DiffLine[] } | null {
  const path = String(input.file_path ?? input.path ?? input.notebook_path ?? '');
  const s = (x: unknown) => (typeof x === 'string' ? x : '');
  if (toolName === 'Edit' && ('old_string' in input || 'new_string' in input)) return { path, lines: lineDiff(s(input.old_string), s(input.new_string)) };
  if (toolName === 'MultiEdit' && Array.isArray(input.edits)) {
    const lines: DiffLine[] = [];
    input.edits.forEach((e: Record<string, unknown>, i: number) => {
      if (i) lines.push({ t: '@', s: `edit ${i + 1}` });
      lines.push(...lineDiff(s(e?.old_string), s(e?.new_string)));
    });
    return { path, lines };
  }
  if (toolName === 'Write' && typeof input.content === 'string') {
    const all = input.content.split('\n');
    const lines: DiffLine[] = all.slice(0, 400).map((l) => ({ t: '+', s: l }));
    if (all.length > 400) lines.push({ t: '@', s: `… ${all.length - 400} more lines` });
    return { path, lines };
  }
  return null;
}
