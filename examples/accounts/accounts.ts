// Sign-up, verify, forgot and reset pages of an app's own, on its own origin, built on
// @authoric/client. The app's `settings.links` point the mailed links here
// (`/verify?token={token}`, `/reset?token={token}`), so people never see the server's pages.
import { AuthoricError, createClient } from "@authoric/client";

declare const __CONFIG__: { url: string; app: string };

const db = createClient({ url: __CONFIG__.url, app: __CONFIG__.app, storage: localStorage });
const message = document.getElementById("message")!;
const token = new URLSearchParams(location.search).get("token") ?? "";

function say(text: string, error = false): void {
  message.textContent = text;
  message.className = error ? "error" : "";
}

function explain(err: unknown): string {
  if (!(err instanceof AuthoricError)) return String(err);
  const reason = (err.details as { reason?: string }).reason;
  if (reason === "invalid_token") return "This link is invalid, used or expired: ask for a new one.";
  if (reason === "email_not_verified") return "Confirm your email first: open the link we mailed you.";
  if (err.status === 429) return "Too many attempts: wait a minute and try again.";
  return err.message;
}

function form(id: string, submit: (data: FormData) => Promise<void>): void {
  const el = document.getElementById(id) as HTMLFormElement;
  el.hidden = false;
  el.addEventListener("submit", (event) => {
    event.preventDefault();
    submit(new FormData(el)).catch((err) => say(explain(err), true));
  });
}

const field = (data: FormData, name: string) => String(data.get(name) ?? "");

switch (location.pathname) {
  case "/verify":
    document.getElementById("verify")!.hidden = false;
    history.replaceState(null, "", "/verify"); // the token leaves the address bar
    db.auth.verifyEmail(token)
      .then(() => say("Your email is confirmed. You can sign in now."))
      .catch((err) => say(explain(err), true));
    break;
  case "/reset":
    history.replaceState(null, "", "/reset");
    form("reset", async (data) => {
      await db.auth.resetPassword(token, field(data, "password"));
      say("Your password is changed, and every other session is signed out. Sign in with it now.");
    });
    break;
  case "/forgot":
    form("forgot", async (data) => {
      await db.auth.requestPasswordReset(field(data, "email"));
      say("If that address has an account, a reset link is on its way.");
    });
    break;
  case "/signin":
    form("signin", async (data) => {
      await db.auth.signIn({ email: field(data, "email"), password: field(data, "password") });
      const me = await db.auth.me();
      say(`Signed in as ${me.user.email}${me.org ? "" : " (no org yet)"}.`);
    });
    break;
  default:
    form("signup", async (data) => {
      const answer = await db.auth.signUp({ email: field(data, "email"), password: field(data, "password") });
      say(answer.status === "verification_sent"
        ? "Check your mail: open the link in it to confirm your address."
        : "Your account is ready, and you are signed in.");
    });
}
