// Prints the gzip size of the first load (index.html and every asset it references) and fails
// the build when it passes the budget.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const BUDGET = 300 * 1024;
const dist = new URL('../../platform/authoric/console_dist/', import.meta.url).pathname;
const html = readFileSync(join(dist, 'index.html'), 'utf8');
const assets = [...html.matchAll(/(?:src|href)="\/console\/([^"]+)"/g)].map((m) => m[1]);
let total = gzipSync(html).length;
for (const asset of assets) {
  const size = gzipSync(readFileSync(join(dist, asset))).length;
  total += size;
  console.log(`  ${asset}: ${(size / 1024).toFixed(1)} KB gzip`);
}
console.log(`console first load: ${(total / 1024).toFixed(1)} KB gzip (budget ${BUDGET / 1024} KB)`);
if (total > BUDGET) {
  console.error('console bundle is over budget');
  process.exit(1);
}
