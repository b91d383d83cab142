// The server's own account pages (verify, reset, invite): the token comes in the URL's
// fragment, which the browser never sends to a server; the page takes it out of the address
// bar and makes the one API call the step needs.
"use strict";

(function () {
  const app = document.body.dataset.app;
  const page = document.body.dataset.page;
  const status = document.getElementById("status");
  const form = document.getElementById("password-form");
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  history.replaceState(null, "", location.pathname);

  function show(text, kind) {
    status.textContent = text;
    status.className = kind || "";
  }

  async function call(path, body) {
    const response = await fetch("/" + encodeURIComponent(app) + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = answer.error || {};
      const reason = (error.details || {}).reason;
      throw new Error(reason === "invalid_token"
        ? "This link is invalid, already used or expired. Ask for a new one."
        : error.message || "Something went wrong (" + response.status + ").");
    }
    return answer;
  }

  if (!token) {
    show("This link has no token. Open the link from the mail as it is.", "error");
    return;
  }
  if (page === "verify") {
    call("/auth/verify", { token })
      .then(() => show("Your email address is verified. You can sign in now.", "ok"))
      .catch((error) => show(error.message, "error"));
    return;
  }
  show(page === "reset" ? "Choose a new password." : "Choose a password to accept.");
  form.hidden = false;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const password = document.getElementById("password").value;
    const path = page === "reset" ? "/auth/password/reset" : "/auth/invitations/accept";
    form.querySelector("button").disabled = true;
    call(path, { token, password })
      .then(() => {
        form.hidden = true;
        show(page === "reset" ? "Your password is changed. You can sign in with it now."
          : "You have joined. You can sign in now.", "ok");
      })
      .catch((error) => {
        form.querySelector("button").disabled = false;
        show(error.message, "error");
      });
  });
})();
