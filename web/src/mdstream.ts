// Incremental markdown for streamed text. The text up to its last cut is split into blocks,
// each parsed once (and kept); only the tail after the last cut is parsed again on each frame, so
// a long answer costs O(new text) per frame, not O(all text). Cuts: at a blank line outside a code
// fence; at a line end once a block passes BLOCK bytes (inside a fence too: the fence is closed at
// the cut and reopened in the next block, so a huge code block is highlighted piece by piece); at a
// space in one huge line. Blocks are small, so each one's layout is small too.

import { hasBudget } from './frame';
import { renderMarkdown } from './markdown';

export const BLOCK = 2048;

export interface Chunk { src: string; html?: string; cont: boolean }
export interface MdState {
  pos: number; // text[0:pos] is in chunks
  scan: number; // the start of the first line not scanned yet
  fence: string; // the open fence's marker (``` or ~~~), '' outside a fence
  opener: string; // the open fence's line (```go)
  prefix: string; // prepended to the next chunk (the reopened fence)
  cont: boolean; // the next chunk continues the previous block
  chunks: Chunk[];
}

export const newMd = (): MdState => ({ pos: 0, scan: 0, fence: '', opener: '', prefix: '', cont: false, chunks: [] });

function cut(s: MdState, text: string, at: number, suffix: string, contNext: boolean) {
  const body = text.slice(s.pos, at);
  if (body.trim()) s.chunks.push({ src: s.prefix + body + suffix, cont: s.cont });
  s.pos = at;
  s.cont = contNext;
}

/** Cuts the blocks that text (a longer version of the text seen before) completes. */
export function advance(s: MdState, text: string) {
  let i = s.scan;
  for (;;) {
    const nl = text.indexOf('\n', i);
    if (nl < 0) break;
    const line = text.slice(i, nl);
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (m && (!s.fence || (m[1][0] === s.fence[0] && m[1].length >= s.fence.length && !line.trim().slice(m[0].trim().length).trim()))) {
      if (s.fence) s.fence = '';
      else {
        s.fence = m[1];
        s.opener = line.trim();
      }
    } else if (s.fence) {
      if (nl + 1 - s.pos > BLOCK) {
        cut(s, text, nl + 1, s.fence + '\n', true);
        s.prefix = s.opener + '\n';
      }
    } else if (!line.trim()) {
      cut(s, text, nl + 1, '', false);
      s.prefix = '';
    } else if (nl + 1 - s.pos > BLOCK) {
      cut(s, text, nl + 1, '', true);
      s.prefix = '';
    }
    i = nl + 1;
  }
  s.scan = i;
  // One huge line: cut at a space.
  if (!s.fence && text.length - s.pos > BLOCK) {
    const sp = text.lastIndexOf(' ', text.length - 1);
    if (sp > s.pos && sp >= s.scan) {
      cut(s, text, sp + 1, '', true);
      s.prefix = '';
      s.scan = Math.max(s.scan, s.pos);
    }
  }
}

/** The markdown source of what is not cut yet. */
export const tailSrc = (s: MdState, text: string) => (text.length > s.pos ? s.prefix + text.slice(s.pos) : '');

/**
 * Parses the chunks not parsed yet while the frame has budget; returns how many chunks are ready
 * (all of them, or the first ones: the rest waits for the next frame).
 */
export function parseChunks(s: MdState): number {
  for (let i = 0; i < s.chunks.length; i++) {
    const c = s.chunks[i];
    if (c.html !== undefined) continue;
    if (!hasBudget()) return i;
    c.html = renderMarkdown(c.src);
  }
  return s.chunks.length;
}

const cache = new Map<string, string>();

/** Markdown of a whole short text, parsed once (undefined: no budget left in this frame). */
export function cachedMarkdown(src: string, force = false): string | undefined {
  const h = cache.get(src);
  if (h !== undefined) return h;
  if (!force && !hasBudget()) return undefined;
  const out = renderMarkdown(src);
  cache.set(src, out);
  if (cache.size > 500) cache.delete(cache.keys().next().value as string);
  return out;
}
