// Prints the raw and gzip -9 size of what a first load fetches (index.html and the JS and CSS it
// references, transitively through static imports) and fails above the budget of 150 KB compressed.
// Run after a build: node scripts/size.mjs [distDir]
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const BUDGET = 150 * 1024;
const dist = process.argv[2] || new URL('../../shared/webui/dist/', import.meta.url).pathname;
const html = readFileSync(join(dist, 'index.html'), 'utf8');

const seen = new Set();
const queue = ['index.html'];
for (const m of html.matchAll(/(?:src|href)="\/?(assets\/[^"]+\.(?:js|css))"/g)) queue.push(m[1]);
const rows = [];
while (queue.length) {
  const f = queue.shift();
  if (seen.has(f) || !existsSync(join(dist, f))) continue;
  seen.add(f);
  const raw = readFileSync(join(dist, f));
  rows.push([f, raw.length, gzipSync(raw, { level: 9 }).length]);
  if (f.endsWith('.js')) {
    // static imports of other chunks: import"./x.js" / from"./x.js"
    for (const m of raw.toString('utf8').matchAll(/(?:import|from)\s*["']\.\/([^"']+\.js)["']/g)) queue.push('assets/' + m[1]);
  }
}
const kb = (n) => (n / 1024).toFixed(1).padStart(7) + ' KB';
let raw = 0;
let gz = 0;
for (const [f, r, g] of rows) {
  raw += r;
  gz += g;
  console.log(`${kb(r)} ${kb(g)} gz  ${f}`);
}
console.log(`${kb(raw)} ${kb(gz)} gz  first load total (budget ${BUDGET / 1024} KB gz)`);
if (gz > BUDGET) {
  console.error(`size: first load is ${(gz / 1024).toFixed(1)} KB compressed, over the ${BUDGET / 1024} KB budget`);
  process.exit(1);
}
