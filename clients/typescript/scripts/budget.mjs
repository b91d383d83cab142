// The first-load budget: what an app ships when it imports `@authoric/client` (and, apart,
// `@authoric/client/admin`), bundled and minified by esbuild, gzipped. The build fails past it.
import { build } from "esbuild";
import { gzipSync } from "node:zlib";

const BUDGET_KB = { "dist/index.js": 15, "dist/admin.js": 15 };
let over = false;
for (const [entry, budget] of Object.entries(BUDGET_KB)) {
  const out = await build({ entryPoints: [entry], bundle: true, minify: true, format: "esm", write: false, platform: "browser" });
  const bytes = gzipSync(out.outputFiles[0].contents, { level: 9 }).length;
  const kb = bytes / 1024;
  console.log(`${entry}: ${kb.toFixed(1)} KB gzip (budget ${budget} KB)`);
  if (kb > budget) over = true;
}
if (over) {
  console.error("over the first-load budget");
  process.exit(1);
}
