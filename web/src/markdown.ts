// Markdown to HTML for assistant text. Untrusted: raw HTML in the source is escaped (shown as
// text, never parsed), link targets are limited to http(s)/mailto/relative, images become links.

import { Marked, Renderer, type Tokens } from 'marked';
import { esc } from './esc';
import { highlight } from './highlight';

function safeHref(href: string): string | null {
  const h = href.trim();
  if (/^(https?:|mailto:)/i.test(h) || /^[#/.]/.test(h)) return h;
  if (!/^[a-z][a-z0-9+.-]*:/i.test(h)) return h; // relative
  return null;
}

const md = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return esc(text);
    },
    code({ text, lang }: Tokens.Code) {
      const l = (lang || '').trim().split(/\s+/)[0].toLowerCase();
      // A long line scrolls the block sideways: keyboard users reach it with Tab (focusable and
      // named, a group rather than a region so that a page of code blocks adds no landmarks).
      const name = l ? `Code, ${esc(l)}` : 'Code';
      return `<pre class="code"${l ? ` data-lang="${esc(l)}"` : ''} tabindex="0" role="group" aria-label="${name}"><code>${highlight(text, l)}</code></pre>`;
    },
    table(this: Renderer, token: Tokens.Table) {
      // A wide table scrolls sideways in its wrapper, which keyboard users reach with Tab.
      return `<div class="table" tabindex="0" role="group" aria-label="Table">${Renderer.prototype.table.call(this, token)}</div>`;
    },
    link(this: { parser: { parseInline(t: Tokens.Generic[]): string } }, { href, title, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      const h = safeHref(href);
      if (h === null) return inner;
      return `<a href="${esc(h)}"${title ? ` title="${esc(title)}"` : ''} target="_blank" rel="noopener noreferrer nofollow">${inner}</a>`;
    },
    image({ href, text }: Tokens.Image) {
      const h = safeHref(href);
      const label = esc(text || 'image');
      return h === null ? label : `<a href="${esc(h)}" target="_blank" rel="noopener noreferrer nofollow">[${label}]</a>`;
    },
  },
});

export function renderMarkdown(src: string): string {
  try {
    return md.parse(src) as string;
  } catch {
    return `<p>${esc(src)}</p>`;
  }
}
