import { describe, expect, it } from "vitest";
import { AuthoricError, createClient } from "../src/index.ts";
import { ADMIN_TOKEN, admin, unique, URL_ } from "./world.ts";

/** An app with sign-up open (and `settings`), and its mailbox as the operator reads it. */
async function openApp(settings: Record<string, unknown> = {}) {
  const name = unique("app");
  await admin.apps.create({ name });
  await admin.app(name).update({ settings: { signUp: "open", ...settings } });
  const tokenFor = async (email: string, subject: string): Promise<string> => {
    const res = await fetch(`${URL_}/admin/apps/${name}/mail`, { headers: { Authorization: `Bearer ${ADMIN_TOKEN}` } });
    const mail = ((await res.json()) as { items: { to: string; subject: string; text: string }[] }).items
      .find((m) => m.to === email && m.subject.includes(subject));
    return /token=([A-Za-z0-9_-]+)/.exec(mail!.text)![1]!;
  };
  return { name, tokenFor };
}

describe("a person managing their own account", () => {
  it("signs up, verifies by the mailed token, signs in with an account token and creates an org", async () => {
    const app = await openApp({ orgCreation: "users" });
    const db = createClient({ url: URL_, app: app.name });
    const email = `${unique("p")}@example.com`;
    expect(await db.auth.signUp({ email, password: "a long password" })).toEqual({ status: "verification_sent" });
    const refused = await db.auth.signIn({ email, password: "a long password" }).catch((e) => e);
    expect(refused).toBeInstanceOf(AuthoricError);
    expect(refused.details.reason).toBe("email_not_verified");
    await db.auth.verifyEmail(await app.tokenFor(email, "Confirm"));
    await db.auth.signIn({ email, password: "a long password" });
    const me = await db.auth.me();
    expect(me.org).toBeNull();
    expect(me.user.emailVerified).toBe(true);
    const org = await db.orgs.create({ name: "Acme" });
    expect((await db.auth.me()).org).toBe(org.uid);
  });

  it("resets a forgotten password, changes it, lists sessions and switches org", async () => {
    const app = await openApp({ emailVerification: "off" });
    const db = createClient({ url: URL_, app: app.name });
    const email = `${unique("p")}@example.com`;
    const signedUp = await db.auth.signUp({ email, password: "a long password" });
    expect(signedUp.status).toBe("signed_in");
    await db.auth.requestPasswordReset(email);
    await db.auth.resetPassword(await app.tokenFor(email, "Reset"), "a second password");
    await db.auth.signIn({ email, password: "a second password" });
    await db.auth.changePassword("a second password", "a third password");
    const sessions = await db.auth.sessions();
    expect(sessions.filter((s) => s.current)).toHaveLength(1);
    const me = await db.auth.me();
    const orgs = admin.app(app.name).orgs;
    const north = (await orgs.create({ name: "North" })).uid;
    await admin.app(app.name).roles.put("viewer", { permissions: [] });
    await admin.app(app.name).members.set(north, me.user.uid, ["viewer"]);
    await db.auth.switchOrg(north);
    expect((await db.auth.me()).roles).toEqual(["viewer"]);
    const wrong = await db.auth.changePassword("not it", "a fourth password").catch((e) => e);
    expect(wrong.status).toBe(401);
  });
});
