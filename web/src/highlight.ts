// A tiny syntax highlighter: comments, strings, numbers and keywords for the languages Claude
// writes most. Output is escaped HTML with <span class="t-…"> tokens.

import { esc } from './esc';

interface Lang { kw: RegExp; line?: string; block?: [string, string]; hash?: boolean }

const C_KW = 'break case catch class const continue default defer do else enum export extends false finally for func function go if import in instanceof interface let new nil null package private protected public return select static struct super switch this throw true try type typeof var void while yield async await fn impl match mut pub use mod trait where self Self None Some Ok Err';
const kw = (s: string) => new RegExp(`^(?:${s.split(' ').join('|')})$`);
const cLike: Lang = { kw: kw(C_KW), line: '//', block: ['/*', '*/'] };
const LANGS: Record<string, Lang> = {
  js: cLike, javascript: cLike, ts: cLike, typescript: cLike, tsx: cLike, jsx: cLike, go: cLike, golang: cLike,
  rust: cLike, rs: cLike, java: cLike, c: cLike, cpp: cLike, 'c++': cLike, cs: cLike, swift: cLike, kotlin: cLike,
  css: { kw: kw('important'), block: ['/*', '*/'] },
  py: { kw: kw('and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self'), hash: true },
  python: undefined as unknown as Lang,
  sh: { kw: kw('if then else elif fi for while do done case esac in function return export local echo cd exit set'), hash: true },
  json: { kw: kw('true false null') },
  yaml: { kw: kw('true false null yes no'), hash: true },
  sql: { kw: kw('select from where insert into update delete create table and or not null join left right inner on group by order limit as values set'), line: '--' },
};
LANGS.python = LANGS.py;
LANGS.bash = LANGS.shell = LANGS.zsh = LANGS.console = LANGS.sh;
LANGS.yml = LANGS.yaml;
LANGS.toml = LANGS.yaml;

export function highlight(code: string, lang: string): string {
  if (lang === 'diff' || lang === 'patch') {
    return code
      .split('\n')
      .map((l) => {
        const c = l.startsWith('+') ? 't-add' : l.startsWith('-') ? 't-del' : l.startsWith('@@') ? 't-hunk' : '';
        return c ? `<span class="${c}">${esc(l)}</span>` : esc(l);
      })
      .join('\n');
  }
  const L = LANGS[lang];
  if (!L || code.length > 200000) return esc(code);
  let out = '';
  let i = 0;
  const n = code.length;
  const span = (cls: string, s: string) => (out += `<span class="${cls}">${esc(s)}</span>`);
  while (i < n) {
    const ch = code[i];
    if ((L.line && code.startsWith(L.line, i)) || (L.hash && ch === '#')) {
      let j = code.indexOf('\n', i);
      if (j < 0) j = n;
      span('t-com', code.slice(i, j));
      i = j;
    } else if (L.block && code.startsWith(L.block[0], i)) {
      let j = code.indexOf(L.block[1], i + 2);
      j = j < 0 ? n : j + L.block[1].length;
      span('t-com', code.slice(i, j));
      i = j;
    } else if (ch === '"' || ch === "'" || ch === '`') {
      let j = i + 1;
      while (j < n && code[j] !== ch) {
        if (code[j] === '\\') j++;
        else if (code[j] === '\n' && ch !== '`') break;
        j++;
      }
      span('t-str', code.slice(i, j + 1));
      i = j + 1;
    } else if (/[0-9]/.test(ch) && !/[\w$]/.test(code[i - 1] || '')) {
      const m = /^(?:0x[0-9a-f_]+|[0-9][0-9_]*(?:\.[0-9_]+)?(?:e[+-]?[0-9]+)?)/i.exec(code.slice(i, i + 40));
      const s = m ? m[0] : ch;
      span('t-num', s);
      i += s.length;
    } else if (/[A-Za-z_$]/.test(ch)) {
      let j = i + 1;
      while (j < n && /[\w$]/.test(code[j])) j++;
      const w = code.slice(i, j);
      if (L.kw.test(w)) span('t-kw', w);
      else out += w;
      i = j;
    } else {
      let j = i + 1;
      while (j < n && !/[\w$"'`#/\-]/.test(code[j])) j++;
      out += esc(code.slice(i, j));
      i = j;
    }
  }
  return out;
}
