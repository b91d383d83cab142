#!/usr/bin/env node
// One command: `node examples/accounts/run.mjs` (with `scripts/serve` running).
// Sets up the demo app on the server through `@authoric/client/admin` (idempotent): sign-up
// open, verification required, mail links pointing to these pages, this origin allowed;
// bundles accounts.ts with esbuild and serves the pages on their own origin.
//   AUTHORIC_URL          the server (default http://127.0.0.1:8000)
//   AUTHORIC_ADMIN_TOKEN  the admin token (default: read from ${AUTHORIC_DATA_DIR:-.authoric}/admin_token)
//   ACCOUNTS_PORT         the pages' port (default 5181)
//   ACCOUNTS_APP          the app (default accountsdemo)
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const lib = join(root, "clients/typescript");
const url = (process.env.AUTHORIC_URL ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const port = Number(process.env.ACCOUNTS_PORT ?? 5181);
const origin = `http://127.0.0.1:${port}`;
const APP = process.env.ACCOUNTS_APP ?? "accountsdemo";

if (!existsSync(join(lib, "node_modules/.bin/esbuild"))) {
  execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: lib, stdio: "inherit" });
}
const { build } = await import(join(lib, "node_modules/esbuild/lib/main.js"));

const tokenFile = join(root, process.env.AUTHORIC_DATA_DIR ?? ".authoric", "admin_token");
const token = process.env.AUTHORIC_ADMIN_TOKEN ?? (existsSync(tokenFile) ? readFileSync(tokenFile, "utf8").trim() : "");
if (!token) {
  console.error(`No admin token: set AUTHORIC_ADMIN_TOKEN, or start the server with scripts/serve (it keeps one in ${tokenFile}).`);
  process.exit(1);
}

const adminJs = await build({ entryPoints: [join(lib, "src/admin.ts")], bundle: true, format: "esm", write: false, platform: "node" });
const { createAdminClient, AuthoricError } = await import(`data:text/javascript;base64,${Buffer.from(adminJs.outputFiles[0].text).toString("base64")}`);

const admin = createAdminClient({ url, token });
try {
  await admin.apps.create({ name: APP });
} catch (err) {
  if (!(err instanceof AuthoricError && err.code === "CONFLICT")) throw err;
}
const app = admin.app(APP);
const { allowedOrigins } = (await app.info()).settings;
await app.update({
  settings: {
    signUp: "open", emailVerification: "required",
    links: { verify: `${origin}/verify?token={token}`, reset: `${origin}/reset?token={token}` },
    allowedOrigins: allowedOrigins.includes(origin) ? allowedOrigins : [...allowedOrigins, origin],
  },
});

const bundle = await build({
  entryPoints: [join(here, "accounts.ts")], bundle: true, format: "esm", write: false,
  alias: { "@authoric/client": join(lib, "src/index.ts") },
  define: { __CONFIG__: JSON.stringify({ url, app: APP }) },
});
const js = bundle.outputFiles[0].text;
const html = readFileSync(join(here, "index.html"));

createServer((req, res) => {
  if (req.url === "/accounts.js") {
    res.writeHead(200, { "Content-Type": "text/javascript; charset=utf-8" }).end(js);
    return;
  }
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" }).end(html);
}).listen(port, "127.0.0.1", () => {
  console.log(`accounts example: ${origin} (app "${APP}"); mail lands in ${url}/console/#/apps/${APP}/mail`);
});
