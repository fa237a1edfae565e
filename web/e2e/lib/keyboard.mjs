// The keyboard path through a page, which axe-core does not check: the skip link first and
// working (it must not change the hash route), then Tab through every focusable element until
// focus leaves the page, each one shown with a focus indicator and in view when it has focus.
// Violations have the shape of lib/axe.mjs's: {rule, impact, help, helpUrl, nodes}.

const WCAG = 'https://www.w3.org/WAI/WCAG21/Understanding/';

const RULES = {
  'skip-link-works': { impact: 'serious', help: 'The skip link must move focus to the main content without leaving the screen', helpUrl: WCAG + 'bypass-blocks' },
  'focus-indicator': { impact: 'serious', help: 'A focused element must show a focus indicator', helpUrl: WCAG + 'focus-visible' },
  'focus-in-view': { impact: 'serious', help: 'A focused element must be in view, not scrolled away or covered', helpUrl: WCAG + 'focus-order' },
  'focus-trap': { impact: 'critical', help: 'Tab must move focus through the page and out of it', helpUrl: WCAG + 'no-keyboard-trap' },
};

/** frames resolves after two animation frames: the app rendered and scrolled. */
const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

/**
 * walk tabs through the page from its skip link and returns the violations and how many
 * elements Tab stopped at. It leaves the page with nothing focused.
 */
export async function walk(page, { max = 300 } = {}) {
  await page.bringToFront();
  const found = new Map(); // rule → nodes
  const add = (rule, node) => {
    if (!found.has(rule)) found.set(rule, []);
    found.get(rule).push(node);
  };

  // The skip link: Enter focuses the main content and stays on the screen. Its href is "#main",
  // which the hash router would take for a route: the app must not follow it (and, if it does,
  // the listener below keeps the page where it is, so that the script can go on).
  await page.evaluate(() => document.querySelector('a.skip')?.focus());
  const skip = await page.evaluate(() => {
    const a = document.activeElement;
    if (!a?.matches('a.skip')) return null;
    window.__skipFollowed = undefined;
    addEventListener('click', (e) => {
      window.__skipFollowed = !e.defaultPrevented;
      e.preventDefault();
    }, { once: true });
    return { html: a.outerHTML };
  });
  if (skip) {
    await page.keyboard.press('Enter');
    await frames(page);
    const after = await page.evaluate(() => ({
      followed: window.__skipFollowed, inMain: !!document.activeElement?.closest('main#main'),
      html: (document.activeElement?.outerHTML ?? '').replace(/>[^]*$/, '>'),
    }));
    if (after.followed) add('skip-link-works', { target: 'a.skip', html: skip.html, summary: 'it follows its href, a hash route' });
    else if (!after.inMain) add('skip-link-works', { target: 'a.skip', html: skip.html, summary: `focus went to ${after.html}` });
    await page.evaluate(() => document.querySelector('a.skip')?.focus());
  } else {
    add('skip-link-works', { target: 'a.skip', html: '', summary: 'no skip link' });
  }

  // Tab until focus leaves the page or comes back to the skip link.
  let steps = 0;
  for (; steps < max; steps++) {
    await page.keyboard.press('Tab');
    await frames(page);
    const f = await page.evaluate(() => {
      const el = document.activeElement;
      if (!el || el === document.body || el.matches('a.skip')) return null;
      const path = [];
      for (let e = el; e && e !== document.body && path.length < 4; e = e.parentElement) {
        const id = e.id ? '#' + CSS.escape(e.id) : '';
        const t = e.getAttribute('data-testid');
        const l = e.getAttribute('aria-label');
        path.unshift(e.tagName.toLowerCase() + id + (t ? `[data-testid="${t}"]` : '') + (l && !id && !t ? `[aria-label="${l}"]` : ''));
        if (id || t) break;
      }
      // What shows the focus: the element's outline, or (a visually hidden file input) its label's.
      const tiny = (r) => r.width < 4 || r.height < 4;
      const box = el.getBoundingClientRect();
      const shown = tiny(box) ? el.closest('label') : el;
      const sbox = shown ? shown.getBoundingClientRect() : box;
      const st = shown ? getComputedStyle(shown) : null;
      const indicator = !!st && !tiny(sbox) && st.outlineStyle !== 'none' && parseFloat(st.outlineWidth) > 0;
      // In view: the middle of what shows is the element (or inside it), not a header over it or
      // nothing because it scrolled away.
      const x = sbox.left + sbox.width / 2;
      const y = sbox.top + Math.min(sbox.height / 2, 10);
      const hit = x >= 0 && y >= 0 && x < innerWidth && y < innerHeight ? document.elementFromPoint(x, y) : null;
      const inView = !!hit && !!shown && (shown.contains(hit) || hit.contains(shown));
      return { target: path.join(' > '), html: el.outerHTML.slice(0, el.outerHTML.indexOf('>') + 1).slice(0, 200), indicator, inView, hit: hit?.outerHTML.slice(0, 80) ?? 'nothing' };
    });
    if (!f) break;
    if (!f.indicator) add('focus-indicator', { target: f.target, html: f.html, summary: 'no outline when focused' });
    if (!f.inView) add('focus-in-view', { target: f.target, html: f.html, summary: `at its place: ${f.hit}` });
  }
  if (steps === max) add('focus-trap', { target: 'document', html: '', summary: `focus still in the page after ${max} Tabs` });
  await page.evaluate(() => document.activeElement?.blur?.());

  return { stops: steps, violations: [...found].map(([rule, nodes]) => ({ rule, ...RULES[rule], nodes })) };
}
