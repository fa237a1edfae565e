// axe-core (pinned in package.json) on the web app's pages, in every look the app has: the
// system's light and dark colour schemes with the theme on "system", and the app's explicit
// light and dark themes, each against the other system scheme (so that an explicit theme that
// leaks the system's colours shows). lib/a11y.mjs's Audit runs it on each screen.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

/** The axe tags checked: WCAG 2.0 and 2.1, A and AA (colour contrast included), and axe's best practices. */
export const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'];

/**
 * Rules of TAGS that do not apply to the app, by id, with why. Empty: every rule applies.
 * A rule goes here only when it cannot apply, never to hide a finding.
 */
export const DISABLED = {};

/** The looks every check runs in: the prefers-color-scheme to emulate and the app's theme setting. */
export const LOOKS = [
  { name: 'light', scheme: 'light', theme: 'system' },
  { name: 'dark', scheme: 'dark', theme: 'system' },
  { name: 'light theme on a dark system', scheme: 'dark', theme: 'light' },
  { name: 'dark theme on a light system', scheme: 'light', theme: 'dark' },
];

/**
 * withAxe loads axe-core into every page of ctx before the app's own scripts (an init script, so
 * the app's Content-Security-Policy does not apply to it).
 */
export async function withAxe(ctx) {
  const src = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await ctx.addInitScript({ content: src });
}

/**
 * setTheme sets the app's theme as a person does, with the top bar's theme button (it cycles
 * system → light → dark), and waits until the page shows it.
 */
export async function setTheme(page, theme) {
  const sel = '[data-testid="theme-toggle"]';
  const button = page.locator(sel).first();
  for (let i = 0; i < 3; i++) {
    const label = (await button.getAttribute('aria-label')) || '';
    if (label.startsWith(`Theme: ${theme}.`)) return;
    await button.click();
    // The app renders on the next animation frame.
    await page.waitForFunction(([sel, label]) => document.querySelector(sel)?.getAttribute('aria-label') !== label, [sel, label]);
  }
  throw new Error(`the theme button does not reach the theme ${theme}`);
}

/** painted resolves after the next two frames: the new colours are laid out and painted. */
const painted = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

/**
 * run checks the page (or, with include, only the elements those selectors match) in each look
 * and returns the violations as {look, rule, impact, help, helpUrl, nodes: [{target, html,
 * summary}]}. With height, the page is checked at that viewport height: axe cannot tell the
 * colours of text scrolled out of view inside a scrolling element (the conversation), so a long
 * conversation is checked laid out whole. The theme, the colour scheme and the viewport are set
 * back after.
 */
export async function run(page, { include, looks = LOOKS, height } = {}) {
  const out = [];
  const rules = Object.fromEntries(Object.keys(DISABLED).map((id) => [id, { enabled: false }]));
  const size = page.viewportSize();
  // A page behind another tab gets an animation frame about once a second (and the app renders
  // on frames): the checked page is the one in front, as when a person looks at it.
  await page.bringToFront();
  try {
    if (height && size) await page.setViewportSize({ width: size.width, height: Math.max(height, size.height) });
    for (const look of looks) {
      await page.emulateMedia({ colorScheme: look.scheme });
      await setTheme(page, look.theme);
      await painted(page);
      const vs = await page.evaluate(
        ([include, tags, rules]) =>
          window.axe
            .run(include ? { include: include.map((s) => [s]) } : document, {
              runOnly: { type: 'tag', values: tags },
              rules,
              resultTypes: ['violations'],
            })
            .then((r) =>
              r.violations.map((v) => ({
                rule: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl.replace(/\?.*$/, ''),
                nodes: v.nodes.map((n) => ({
                  target: n.target.join(' '),
                  html: n.html.length > 200 ? n.html.replace(/\s+/g, ' ').slice(0, 200) + '…' : n.html.replace(/\s+/g, ' '),
                  summary: (n.failureSummary || '').split('\n').slice(1).join(' ').trim(),
                })),
              })),
            ),
        [include || null, TAGS, rules],
      );
      for (const v of vs) out.push({ look: look.name, ...v });
    }
  } finally {
    await setTheme(page, 'system').catch(() => {});
    await page.emulateMedia({ colorScheme: null });
    if (height && size) await page.setViewportSize(size);
  }
  return out;
}

/**
 * format lists violations one element a line, the looks it fails in merged:
 * "screen: rule (impact) at target [looks]: help; summary <help URL>\n    html".
 */
export function format(vs) {
  const lines = new Map();
  for (const v of vs) {
    for (const n of v.nodes) {
      const key = `${v.screen ?? ''}\0${v.rule}\0${n.target}\0${n.summary}`;
      const have = lines.get(key);
      if (have) have.looks.push(v.look);
      else lines.set(key, { v, n, looks: [v.look] });
    }
  }
  return [...lines.values()]
    .map(({ v, n, looks }) =>
      `${v.screen ? v.screen + ': ' : ''}${v.rule} (${v.impact}) at ${n.target} [${[...new Set(looks)].join(', ')}]: ${v.help}` +
      `${n.summary ? '; ' + n.summary : ''} <${v.helpUrl}>\n    ${n.html}`,
    )
    .join('\n');
}
