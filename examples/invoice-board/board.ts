// A live invoice board: three columns of invoices by status, kept current by live queries
// from the server's change stream. Open it in two windows and watch one follow the other.
import { AuthoricError, createClient, type LiveQuery, type Status } from "@authoric/client";

declare const __CONFIG__: { url: string; app: string; email: string; password: string };

interface VendorsRow { uid: string; name: string; createdAt: string; updatedAt: string }
interface InvoicesRow {
  uid: string; number: string; vendor_uid: string | null; amount: string | null;
  status: string | null; createdAt: string; updatedAt: string;
}
interface BoardTables { invoices: InvoicesRow; vendors: VendorsRow }

const STATUSES = ["received", "approved", "paid"] as const;
const db = createClient<BoardTables>({ url: __CONFIG__.url, app: __CONFIG__.app, storage: localStorage });
const $ = <T extends HTMLElement>(sel: string) => document.querySelector(sel) as T;
const el = (tag: string, attrs: Record<string, string> = {}, ...kids: (Node | string)[]) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...kids);
  return node;
};

let vendors = new Map<string, string>();
const columns = new Map<string, InvoicesRow[]>();
const live: LiveQuery<unknown>[] = [];

function report(err: unknown): void {
  $("#error").textContent = err instanceof AuthoricError ? `${err.code}: ${err.message}` : String(err);
}

function render(): void {
  for (const status of STATUSES) {
    const list = $(`#col-${status} ul`);
    const rows = columns.get(status) ?? [];
    $(`#col-${status} .count`).textContent = String(rows.length);
    list.replaceChildren(...rows.map((row) => {
      const next = STATUSES[STATUSES.indexOf(status) + 1];
      const move = next ? el("button", { "data-move": row.uid, "data-to": next }, `→ ${next}`) : "";
      return el("li", { class: "card" },
        el("strong", {}, row.number), el("span", { class: "amount" }, row.amount ?? "–"),
        el("div", { class: "vendor" }, row.vendor_uid ? vendors.get(row.vendor_uid) ?? "…" : "no vendor"),
        el("div", { class: "actions" }, move, el("button", { "data-delete": row.uid }, "delete")));
    }));
  }
  const select = $<HTMLSelectElement>("#vendor");
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "no vendor"),
    ...[...vendors].map(([uid, name]) => el("option", { value: uid }, name)));
  select.value = chosen;
}

function showStatus(status: Status): void {
  $("#status").textContent = status;
  $("#status").className = `pill ${status}`;
}

async function start(): Promise<void> {
  $("#signin").hidden = true;
  $("#board").hidden = false;
  $("#who").textContent = __CONFIG__.email;
  live.push(db.table("vendors").liveQuery({ order: "name" }, (rows) => {
    vendors = new Map(rows.map((v) => [v.uid, v.name]));
    render();
  }));
  // One live query (one stream) for the whole board, split by status here: a browser holds
  // about six connections per host over HTTP/1.1, and every stream keeps one open.
  live.push(db.table("invoices").liveQuery(
    { filter: { status: { in: [...STATUSES] } }, order: "-createdAt", onStatus: showStatus, onError: report },
    (rows) => {
      for (const status of STATUSES) columns.set(status, rows.filter((r) => r.status === status));
      render();
    }));
}

$("#signin").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = new FormData(e.target as HTMLFormElement);
  try {
    await db.auth.signIn({ email: String(form.get("email")), password: String(form.get("password")) });
    await start();
  } catch (err) {
    report(err);
  }
});

$("#new").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target as HTMLFormElement;
  const data = new FormData(form);
  try {
    await db.table("invoices").create({
      number: String(data.get("number")), amount: String(data.get("amount")) || null,
      vendor_uid: String(data.get("vendor")) || null, status: "received",
    });
    form.reset();
  } catch (err) {
    report(err);
  }
});

$("#new-vendor").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target as HTMLFormElement;
  try {
    await db.table("vendors").create({ name: String(new FormData(form).get("name")) });
    form.reset();
  } catch (err) {
    report(err);
  }
});

$("#board").addEventListener("click", async (e) => {
  const target = e.target as HTMLElement;
  try {
    if (target.dataset.move) await db.table("invoices").update(target.dataset.move, { status: target.dataset.to ?? null });
    if (target.dataset.delete) await db.table("invoices").delete(target.dataset.delete);
    if (target.id === "pay-all") await db.table("invoices").updateWhere({ status: "approved" }, { status: "paid" });
  } catch (err) {
    report(err);
  }
});

$("#signout").addEventListener("click", async () => {
  for (const q of live.splice(0)) q.close();
  await db.auth.signOut().catch(report);
  location.reload();
});

($("#signin").querySelector("[name=email]") as HTMLInputElement).value = __CONFIG__.email;
($("#signin").querySelector("[name=password]") as HTMLInputElement).value = __CONFIG__.password;
if (db.auth.session) void start(); // a session kept by another tab or an earlier visit
