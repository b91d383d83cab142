#!/usr/bin/env node
// One command: `node examples/invoice-board/run.mjs` (with `scripts/serve` running).
// Sets up the demo app on the server through `@authoric/client/admin` (idempotent), bundles
// the board with esbuild, and serves it on its own origin (http://127.0.0.1:5180).
//   AUTHORIC_URL          the server (default http://127.0.0.1:8000)
//   AUTHORIC_ADMIN_TOKEN  the admin token (default: read from ${AUTHORIC_DATA_DIR:-.authoric}/admin_token)
//   BOARD_PORT            the board's port (default 5180)
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const lib = join(root, "clients/typescript");
const url = (process.env.AUTHORIC_URL ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const port = Number(process.env.BOARD_PORT ?? 5180);
const origin = `http://127.0.0.1:${port}`;
const APP = process.env.BOARD_APP ?? "invoiceboard";
const DEMO = { email: "demo@example.com", password: "demo password 1" };

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

// The admin entry point, compiled on the fly from the library's sources.
const adminJs = await build({ entryPoints: [join(lib, "src/admin.ts")], bundle: true, format: "esm", write: false, platform: "node" });
const { createAdminClient, AuthoricError } = await import(`data:text/javascript;base64,${Buffer.from(adminJs.outputFiles[0].text).toString("base64")}`);

async function ensure(call) {
  try {
    return await call();
  } catch (err) {
    if (err instanceof AuthoricError && err.code === "CONFLICT") return null; // there already
    throw err;
  }
}

const admin = createAdminClient({ url, token });
await ensure(() => admin.apps.create({ name: APP }));
const app = admin.app(APP);
const settings = (await app.info()).settings;
if (!settings.allowedOrigins.includes(origin)) await app.update({ settings: { allowedOrigins: [...settings.allowedOrigins, origin] } });
await ensure(() => app.tables.create({ name: "vendors", columns: [{ name: "name", type: "text", required: true, unique: true }] }));
await ensure(() => app.tables.create({
  name: "invoices",
  columns: [
    { name: "number", type: "text", required: true, unique: true },
    { name: "vendor", type: "reference", references: "vendors" },
    { name: "amount", type: "numeric" },
    { name: "status", type: "text", default: "received" },
  ],
}));
const orgs = (await app.orgs.list()).items;
const org = orgs.find((o) => o.name === "Demo") ?? (await app.orgs.create({ name: "Demo" }));
await app.roles.put("clerk", { permissions: ["invoices:*", "vendors:*"] });
const users = (await app.users.list()).items;
const user = users.find((u) => u.email === DEMO.email) ?? (await app.users.create(DEMO));
await app.members.set(org.uid, user.uid, ["clerk"]);

const bundle = await build({
  entryPoints: [join(here, "board.ts")], bundle: true, format: "esm", write: false, minify: true,
  alias: { "@authoric/client": join(lib, "src/index.ts") },
  define: { __CONFIG__: JSON.stringify({ url, app: APP, ...DEMO }) },
});
const files = {
  "/": ["text/html", readFileSync(join(here, "index.html"))],
  "/board.js": ["text/javascript", bundle.outputFiles[0].contents],
};
createServer((req, res) => {
  const path = new URL(req.url ?? "/", origin).pathname;
  const file = files[path === "/index.html" ? "/" : path];
  res.writeHead(file ? 200 : 404, { "Content-Type": file ? file[0] : "text/plain" });
  res.end(file ? file[1] : "not found");
}).listen(port, "127.0.0.1", () => {
  console.log(`Invoice board: ${origin}  (app "${APP}" on ${url}; sign in as ${DEMO.email} / ${DEMO.password})`);
});
