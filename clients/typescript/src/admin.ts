/** `@authoric/client/admin`: the platform administration surface (contract sections 2 and 2a)
 * for operators and the console, authenticated with the platform admin token. */

import { Http, type FetchLike, type Query } from "./http.js";
import { listParams } from "./client.js";
import { Stream, type StreamOptions, type Subscription } from "./stream.js";
import type { ChangeEvent, Expanded, ListQuery, Page, UntypedRow } from "./types.js";

export { AuthoricError } from "./errors.js";
export type { Subscription, StreamOptions } from "./stream.js";
export type { ChangeEvent, Expanded, Filter, ListQuery, Page, Status, UntypedRow } from "./types.js";

// Every request body and answer is generated from the platform OpenAPI document
// (scripts/admin-types, admin.generated.ts); written here are only what a document cannot name:
// generic pages, the operator's rows (the app's own columns), and the older names.
import type {
  AccessToken, AppChange, AppInfo, AppList, AuditEntry, AuditPage, ColumnTypes, Delivery, DeliveryList,
  ImpersonationRequest, IndexDef, IndexList, IndexSpec, Invitation, InvitationList, KeyList, MailPage, MemberPage,
  MemberSet, MembershipList, NewApiKey, NewApp, NewInvitation, NewKey, NewOrg, NewTable, NewUser, NewWebhook, Org, OrgList,
  Preview, PreviewRequest, Replay, Role, RoleBody, RoleList, SessionList, TableChange, TableDef, TableList, TestSend, User,
  UserList, WebhookChange, WebhookList, WebhookView, WebhookWithSecret,
} from "./admin.generated.js";
export type * from "./admin.generated.js";

/** A webhook (contract section 8); its `secret` is in the answers of create and rotate only. */
export type Webhook = WebhookView;
/** One attempt to deliver a webhook's change. */
export type WebhookDelivery = Delivery;
/** Who made an audited change. */
export type AuditActor = AuditEntry["actor"];

/** A list answer. */
export interface Items<T> {
  items: T[];
}

/** A page of a list answer, and the cursor of the next page (null: the last). */
export interface Paged<T> {
  items: T[];
  next: string | null;
}

/** An operator's row: a row of any org, with its `org`. */
export type OrgRow = UntypedRow & { org: string };

/** A list of the operator's rows: one org or every org, and a count that may be estimated. */
export type AdminListQuery = Omit<ListQuery<UntypedRow>, "count"> & { org?: string; count?: boolean | "estimate" };

export interface AdminOptions {
  url: string;
  /** The platform admin token (`AUTHORIC_ADMIN_TOKEN`). */
  token: string;
  fetch?: FetchLike;
}

const seg = encodeURIComponent;

function fixedToken(token: string): Http["tokens"] {
  return { token: async () => token, expired: async () => null };
}

/** The operator's view of one table's rows (section 2a): every org, no policy. */
export class AdminRows {
  constructor(private readonly http: Http, private readonly base: string) {}

  /** `count: "estimate"` (the operator's only) adds the planner's `total` with `estimated: true`. */
  list(query: AdminListQuery = {}): Promise<Page<OrgRow> & { estimated?: boolean }> {
    const count = query.count === "estimate" ? "estimate" : query.count ? "exact" : undefined;
    return this.http.json("GET", this.base, { query: { ...listParams({ ...query, count: false }), org: query.org, count } });
  }

  get(uid: string): Promise<OrgRow & Expanded> {
    return this.http.json("GET", `${this.base}/${seg(uid)}`);
  }

  create(row: { org: string; [column: string]: unknown }): Promise<OrgRow> {
    return this.http.json("POST", this.base, { json: row });
  }

  update(uid: string, patch: Record<string, unknown>): Promise<OrgRow> {
    return this.http.json("PATCH", `${this.base}/${seg(uid)}`, { json: patch });
  }

  async delete(uid: string): Promise<void> {
    await this.http.send("DELETE", `${this.base}/${seg(uid)}`);
  }

  importCsv(csv: string | Blob, org: string): Promise<{ inserted: number }> {
    return this.http.json("POST", `${this.base}/import`, { body: csv, contentType: "text/csv", query: { org } });
  }

  /** Every org's changes, unredacted, each row with its `org`. */
  subscribe(opts: StreamOptions<ChangeEvent<OrgRow>> = {}): Subscription {
    return new Stream(this.http, `${this.base}/subscribe`, {}, opts);
  }
}

/** Administration of one app. */
export class AppAdmin {
  readonly base: string;

  constructor(private readonly http: Http, readonly name: string) {
    this.base = `/admin/apps/${seg(name)}`;
  }

  private get<T>(path: string, query?: Query): Promise<T> {
    return this.http.json("GET", this.base + path, { query });
  }

  private write<T>(method: string, path: string, json?: unknown): Promise<T> {
    return this.http.json(method, this.base + path, json === undefined ? {} : { json });
  }

  info(): Promise<AppInfo> {
    return this.get("");
  }

  update(change: AppChange): Promise<AppInfo> {
    return this.write("PATCH", "", change);
  }

  delete(): Promise<void> {
    return this.write("DELETE", "");
  }

  readonly tables = {
    list: () => this.get<TableList>("/tables"),
    get: (table: string) => this.get<TableDef>(`/tables/${seg(table)}`),
    create: (table: NewTable) => this.write<TableDef>("POST", "/tables", table),
    /** A schema change: all of it applies, or none of it (422 with `details.rows`). */
    update: (table: string, change: TableChange) => this.write<TableDef>("PATCH", `/tables/${seg(table)}`, change),
    delete: (table: string) => this.write<void>("DELETE", `/tables/${seg(table)}`),
  };

  readonly indexes = {
    list: (table: string) => this.get<IndexList>(`/tables/${seg(table)}/indexes`),
    get: (table: string, name: string) => this.get<IndexDef>(`/tables/${seg(table)}/indexes/${seg(name)}`),
    /** Starts building (202, `state: "building"`); poll `get` for `ready` or `failed`. */
    put: (table: string, name: string, body: IndexSpec) =>
      this.write<IndexDef>("PUT", `/tables/${seg(table)}/indexes/${seg(name)}`, body),
    delete: (table: string, name: string) => this.write<void>("DELETE", `/tables/${seg(table)}/indexes/${seg(name)}`),
  };

  readonly orgs = {
    list: () => this.get<OrgList>("/orgs"),
    create: (org: NewOrg) => this.write<Org>("POST", "/orgs", org),
    delete: (org: string) => this.write<void>("DELETE", `/orgs/${seg(org)}`),
    members: (org: string, page: { limit?: number; after?: string | null } = {}) =>
      this.get<MemberPage>(`/orgs/${seg(org)}/members`, page),
  };

  readonly users = {
    list: () => this.get<UserList>("/users"),
    create: (user: NewUser) => this.write<User>("POST", "/users", user),
    delete: (user: string) => this.write<void>("DELETE", `/users/${seg(user)}`),
    memberships: (user: string) => this.get<MembershipList>(`/users/${seg(user)}/memberships`),
    sessions: (user: string) => this.get<SessionList>(`/users/${seg(user)}/sessions`),
    endSession: (user: string, session: string) =>
      this.write<void>("DELETE", `/users/${seg(user)}/sessions/${seg(session)}`),
  };

  readonly members = {
    set: (org: string, user: string, roles: string[]) =>
      this.write<MemberSet>("PUT", `/orgs/${seg(org)}/members/${seg(user)}`, { roles }),
    remove: (org: string, user: string) => this.write<void>("DELETE", `/orgs/${seg(org)}/members/${seg(user)}`),
  };

  /** An org's invitations (section 3a): inviting the same email again resends. */
  readonly invitations = {
    list: (org: string) => this.get<InvitationList>(`/orgs/${seg(org)}/invitations`),
    create: (org: string, body: NewInvitation) =>
      this.write<Invitation>("POST", `/orgs/${seg(org)}/invitations`, body),
    revoke: (org: string, uid: string) => this.write<void>("DELETE", `/orgs/${seg(org)}/invitations/${seg(uid)}`),
  };

  /** An org's API keys (section 3b). */
  readonly keys = {
    list: (org: string) => this.get<KeyList>(`/orgs/${seg(org)}/keys`),
    create: (org: string, body: NewKey) =>
      this.write<NewApiKey>("POST", `/orgs/${seg(org)}/keys`, body),
    revoke: (org: string, uid: string) => this.write<void>("DELETE", `/orgs/${seg(org)}/keys/${seg(uid)}`),
  };

  readonly roles = {
    list: () => this.get<RoleList>("/roles"),
    get: (role: string) => this.get<Role>(`/roles/${seg(role)}`),
    put: (role: string, body: RoleBody) => this.write<Role>("PUT", `/roles/${seg(role)}`, body),
    delete: (role: string) => this.write<void>("DELETE", `/roles/${seg(role)}`),
    /** A dry run: what a member would see with the role as saved and as drafted. */
    preview: (role: string, body: PreviewRequest) =>
      this.write<Preview>("POST", `/roles/${seg(role)}/preview`, body),
  };

  readonly webhooks = {
    list: () => this.get<WebhookList>("/webhooks"),
    get: (uid: string) => this.get<Webhook>(`/webhooks/${seg(uid)}`),
    create: (hook: NewWebhook) => this.write<WebhookWithSecret>("POST", "/webhooks", hook),
    update: (uid: string, change: WebhookChange) =>
      this.write<Webhook>("PATCH", `/webhooks/${seg(uid)}`, change),
    delete: (uid: string) => this.write<void>("DELETE", `/webhooks/${seg(uid)}`),
    rotateSecret: (uid: string) => this.write<WebhookWithSecret>("POST", `/webhooks/${seg(uid)}/secret`),
    deliveries: (uid: string, page: { limit?: number; after?: string | null } = {}) =>
      this.get<DeliveryList>(`/webhooks/${seg(uid)}/deliveries`, page),
    /** One signed `{"type": "test"}` delivery, outside the change log: what the receiver answered. */
    test: (uid: string) =>
      this.write<TestSend>("POST", `/webhooks/${seg(uid)}/test`),
    /** Send again from `from` (a position, included). */
    replay: (uid: string, from: string) => this.write<Webhook>("POST", `/webhooks/${seg(uid)}/replay`, { from } satisfies Replay),
  };

  /** A read-only access token for a member ("view as"); `ttl` at most 900 s. */
  impersonate(body: ImpersonationRequest): Promise<AccessToken> {
    return this.write("POST", "/impersonate", body);
  }

  rows(table: string): AdminRows {
    return new AdminRows(this.http, `${this.base}/tables/${seg(table)}/rows`);
  }

  audit(page: { limit?: number; after?: string | null; actor?: AuditActor["kind"] } = {}): Promise<AuditPage> {
    return this.get("/audit", page);
  }

  /** The app's mailbox (section 3): the mail sent without SMTP, newest first. */
  mail(page: { limit?: number; after?: string | null } = {}): Promise<MailPage> {
    return this.get("/mail", page);
  }

  /** The app's OpenAPI document (section 6), every table. */
  openapi(): Promise<Record<string, unknown>> {
    return this.http.json("GET", `/${seg(this.name)}/openapi.json`);
  }
}

export class AdminClient {
  readonly http: Http;

  constructor(opts: AdminOptions) {
    this.http = new Http(opts.url, opts.fetch);
    this.http.tokens = fixedToken(opts.token);
  }

  /** The column types and conversions the server makes (the console reads them from here). */
  columnTypes(): Promise<ColumnTypes> {
    return this.http.json<ColumnTypes>("GET", "/admin/column-types");
  }

  readonly apps = {
    list: () => this.http.json<AppList>("GET", "/admin/apps"),
    get: (app: string) => this.app(app).info(),
    create: (app: NewApp) => this.http.json<AppInfo>("POST", "/admin/apps", { json: app }),
    update: (app: string, change: AppChange) => this.app(app).update(change),
    delete: (app: string) => this.app(app).delete(),
  };

  app(name: string): AppAdmin {
    return new AppAdmin(this.http, name);
  }
}

export function createAdminClient(opts: AdminOptions): AdminClient {
  return new AdminClient(opts);
}
