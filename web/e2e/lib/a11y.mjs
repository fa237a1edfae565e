// Accessibility checks of the screens a script passes: axe-core's WCAG 2.0/2.1 A and AA rules
// and best practices in every look of the app (lib/axe.mjs), and the keyboard path, which axe
// does not check (lib/keyboard.mjs). A script checks each screen as it gets there and fails at
// the end with every violation: the rule, the element, what is wrong and the rule's help page.
import { log } from './harness.mjs';
import { format, run } from './axe.mjs';
import { walk } from './keyboard.mjs';

export { withAxe } from './axe.mjs';

/** countNodes counts the elements that fail a rule, once whatever the looks they fail in. */
const countNodes = (vs) => new Set(vs.flatMap((v) => v.nodes.map((n) => `${v.screen}\0${v.rule}\0${n.target}`))).size;

/**
 * Audit collects the violations of the screens a script checks, logs each screen's as it goes
 * (a script that fails later still shows them) and reports them all at the end.
 */
export class Audit {
  constructor() {
    /** {screen, look, rule, impact, help, helpUrl, nodes} */
    this.violations = [];
    /** the screens checked, in order */
    this.screens = [];
  }

  /**
   * check runs axe on the whole page (or only opts.include) in every look, as screen (opts: see
   * run in lib/axe.mjs), then, on a whole page, walks it with the keyboard.
   */
  async check(page, screen, opts = {}) {
    const t0 = Date.now();
    const vs = (await run(page, opts)).map((v) => ({ screen, ...v }));
    let tabStops;
    if (!opts.include) {
      const k = await walk(page);
      tabStops = k.stops;
      vs.push(...k.violations.map((v) => ({ screen, look: 'keyboard', ...v })));
    }
    this.screens.push(screen);
    this.violations.push(...vs);
    log(`a11y ${screen}: ${vs.length ? `${countNodes(vs)} violations` : 'no violation'}`, { ms: Date.now() - t0, tabStops });
    if (vs.length) log(format(vs));
  }

  /** assertClean throws one error listing every violation found, if any. */
  assertClean() {
    if (!this.violations.length) return;
    const rules = [...new Set(this.violations.map((v) => v.rule))];
    throw new Error(
      `accessibility: ${countNodes(this.violations)} violations of ${rules.length} rules (${rules.join(', ')}) ` +
        `on ${this.screens.length} screens:\n${format(this.violations)}`,
    );
  }
}
