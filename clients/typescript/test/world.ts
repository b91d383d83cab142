/** Test worlds on the real server the pytest side started: an app with `vendors` and
 * `invoices`, an org, a clerk role and members, made through `@authoric/client/admin`. */

import { writeFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import { AuthoricError, createClient, type Client } from "../src/index.ts";
import { createAdminClient, type AppAdmin } from "../src/admin.ts";

function need(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through tests/clients/test_typescript_client.py`);
  return value;
}

export const URL_ = need("AUTHORIC_URL");
export const ADMIN_TOKEN = need("AUTHORIC_ADMIN_TOKEN");
export const admin = createAdminClient({ url: URL_, token: ADMIN_TOKEN });

export interface VendorsRow { uid: string; name: string; createdAt: string; updatedAt: string }
export interface InvoicesRow {
  uid: string; number: string; status: string | null; amount: string | null; paid: boolean | null;
  seq: number | null; vendor_uid: string | null; createdAt: string; updatedAt: string;
}
export interface ShopTables { invoices: InvoicesRow; vendors: VendorsRow }

export interface Member {
  email: string;
  password: string;
  uid: string;
  client(): Promise<Client<ShopTables>>;
}

export interface World {
  name: string;
  app: AppAdmin;
  org: string;
  member(): Promise<Member>;
}

export function unique(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 10)}`;
}

/** A fresh app; `accessTokenTtl` in seconds when given. */
export async function world(settings: { accessTokenTtl?: number } = {}): Promise<World> {
  const name = unique("app");
  await admin.apps.create({ name });
  const app = admin.app(name);
  if (settings.accessTokenTtl) await app.update({ settings });
  await app.tables.create({ name: "vendors", columns: [{ name: "name", type: "text", required: true }] });
  await app.tables.create({
    name: "invoices",
    columns: [
      { name: "number", type: "text", required: true, unique: true },
      { name: "status", type: "text" },
      { name: "amount", type: "numeric" },
      { name: "paid", type: "boolean" },
      { name: "seq", type: "integer" },
      { name: "vendor", type: "reference", references: "vendors" },
    ],
  });
  const org = (await app.orgs.create({ name: "Northwind" })).uid;
  await app.roles.put("clerk", { permissions: ["invoices:*", "vendors:*"] });
  return {
    name, app, org,
    async member() {
      const email = `${unique("u")}@example.com`;
      const password = "correct horse battery";
      const { uid } = await app.users.create({ email, password });
      await app.members.set(org, uid, ["clerk"]);
      return {
        email, password, uid,
        async client() {
          const db = createClient<ShopTables>({ url: URL_, app: name });
          await db.auth.signIn({ email, password });
          return db;
        },
      };
    },
  };
}

/** Moves the server's clock (seconds added to its now when it issues and checks tokens). */
export function setClock(seconds: number): void {
  writeFileSync(need("AUTHORIC_CLOCK_FILE"), String(seconds));
}

/** Kills the server (SIGKILL) and starts it again on the same port; resolves once it serves. */
export async function restartServer(): Promise<void> {
  const res = await fetch(`${need("AUTHORIC_CONTROL_URL")}/restart`, { method: "POST" });
  if (!res.ok) throw new Error(`restart failed: ${res.status} ${await res.text()}`);
}

/** Waits until `check` holds (polling), failing after a wide timeout. */
export async function until(what: string, check: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The AuthoricError a call fails with (the test fails if it succeeds). */
export async function rejection(p: Promise<unknown>): Promise<AuthoricError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AuthoricError);
    return err as AuthoricError;
  }
  throw new Error("expected the call to fail");
}
