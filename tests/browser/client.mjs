// The browser side of the Chromium tests: what an app's own page does with Authoric, using
// the two SSE clients people use. Bundled by the tests with esbuild into an IIFE that sets
// `window.authoric`; the tests drive it with page.evaluate and read `window.authoric.state`.
import { fetchEventSource } from "@microsoft/fetch-event-source";
import { EventSource } from "eventsource";

const state = {
  frames: [], // {stream, event, id, data} in arrival order, across reconnects
  opens: 0, // successful (200) stream opens
  errors: [], // messages of failed fetches and stream errors
  refreshes: 0, // token refreshes done by the reauth handler
};

function record(stream, event, id, data) {
  state.frames.push({ stream, event: event || "message", id: id || null, data: data ? JSON.parse(data) : null });
}

async function call(base, method, path, token, body) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(base + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

// A session: log in, call REST, and follow a table with fetch-event-source, refreshing the
// token and reopening from the last id when the server sends `reauth`.
function session(base, app) {
  const s = { base, app, access: null, refresh: null, lastId: null, controller: null };

  s.login = async (email, password) => {
    const r = await call(base, "POST", `/${app}/auth/token`, null, { email, password });
    if (r.status !== 200) throw new Error(`login ${r.status}`);
    s.access = r.body.access_token;
    s.refresh = r.body.refresh_token;
    return r.status;
  };

  s.refreshToken = async () => {
    const r = await call(base, "POST", `/${app}/auth/refresh`, null, { refresh_token: s.refresh });
    if (r.status !== 200) throw new Error(`refresh ${r.status}`);
    s.access = r.body.access_token;
    s.refresh = r.body.refresh_token;
    state.refreshes += 1;
  };

  s.rest = (method, path, body) => call(base, method, `/${app}${path}`, s.access, body);

  s.follow = (path, name) => {
    let reauth = false;
    s.controller = new AbortController();
    const headers = { Authorization: `Bearer ${s.access}`, Accept: "text/event-stream" };
    // fetch-event-source keeps the last id under this lower-case key: use the same one.
    if (s.lastId !== null) headers["last-event-id"] = s.lastId;
    fetchEventSource(base + `/${app}${path}`, {
      headers,
      signal: s.controller.signal,
      openWhenHidden: true,
      async onopen(response) {
        if (response.status !== 200) throw new Error(`open ${response.status}`);
        state.opens += 1;
      },
      onmessage(ev) {
        if (ev.id) s.lastId = ev.id;
        if (ev.event === "reauth") reauth = true;
        record(name, ev.event, ev.id, ev.data);
      },
      onclose() {
        if (reauth) {
          // The stream ended because the token expired: refresh, then reopen from the last id.
          s.refreshToken().then(() => s.follow(path, name)).catch((e) => state.errors.push(String(e)));
          return;
        }
        throw new Error("closed by the server"); // anything else: let the library retry
      },
      onerror(err) {
        if (reauth) throw err; // stop this one; onclose reopened it
        state.errors.push(String(err));
        return 500; // retry in 0.5 s, with the same headers and the library's Last-Event-ID
      },
    }).catch((e) => state.errors.push(String(e)));
  };

  s.stop = () => s.controller && s.controller.abort();
  return s;
}

// Several tables on one connection with the `eventsource` package (its `fetch` option sets the
// bearer header on every connection, and it resends Last-Event-ID itself).
function followTables(base, app, tables, token, name, lastEventId) {
  let url = `${base}/${app}/subscribe?tables=${encodeURIComponent(tables.join(","))}`;
  if (lastEventId) url += `&lastEventId=${encodeURIComponent(lastEventId)}`;
  const source = new EventSource(url, {
    fetch: (input, init) => fetch(input, {
      ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` },
    }),
  });
  source.addEventListener("open", () => { state.opens += 1; });
  source.addEventListener("connected", (ev) => record(name, "connected", null, ev.data));
  source.addEventListener("resync", (ev) => record(name, "resync", ev.lastEventId, ev.data));
  source.addEventListener("message", (ev) => record(name, "message", ev.lastEventId, ev.data));
  source.addEventListener("error", (ev) => state.errors.push(`eventsource: ${ev.message || "error"}`));
  return source;
}

async function tryFetch(url) {
  try {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    return { ok: true, status: response.status };
  } catch (e) {
    return { ok: false, error: String(e) };
  }
}

window.authoric = { state, session, followTables, tryFetch, call };
