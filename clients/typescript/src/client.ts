/** `createClient`: one app's sessions, tables and streams (contract sections 3 to 5b, 7). */

import { Auth, type AuthOptions, type TokenPair } from "./auth.js";
import { Http, type FetchLike, type Query } from "./http.js";
import { Org } from "./org.js";
import { Live, type LiveQuery, type LiveQueryOptions } from "./live.js";
import { kindsOf, type Kinds } from "./match.js";
import { Stream, type StreamOptions, type Subscription } from "./stream.js";
import type {
  ChangeEvent, EventOf, Expanded, ExpandPath, Filter, ListQuery, Page, Read, TableMap, Untyped, Writable,
} from "./types.js";

export interface ClientOptions extends AuthOptions {
  /** The server's base URL, e.g. `https://api.example.com`. */
  url: string;
  /** The app's name. */
  app: string;
  /** A fetch to use instead of the global one. */
  fetch?: FetchLike;
  /** An API key (section 3b) to act with instead of a session: for servers and scripts. */
  apiKey?: string;
}

/** The query string of a list or bulk write (section 4). */
export function listParams<R, P extends string>(q: Omit<ListQuery<R, P>, "count"> & { count?: boolean | string } = {}): Query {
  const filter = q.filter as Record<string, unknown> | undefined;
  return {
    filter: filter && Object.keys(filter).length ? JSON.stringify(filter) : undefined,
    order: q.order as string | undefined,
    limit: q.limit,
    after: q.after,
    expand: q.expand?.length ? q.expand.join(",") : undefined,
    count: q.count === true ? "exact" : q.count || undefined,
  };
}

export class Table<R> {
  constructor(private readonly client: Client<never>, readonly name: string) {}

  private get http(): Http {
    return this.client.http;
  }

  private path(suffix = ""): string {
    return `/${encodeURIComponent(this.client.app)}/autocrud/${encodeURIComponent(this.name)}${suffix}`;
  }

  /** One page: `{ items, next, total? }`; `expand: ["vendor"]` types `row.expand.vendor`. */
  list<const P extends ExpandPath<R> = never>(query: ListQuery<R, P> = {}): Promise<Page<R, P>> {
    return this.http.json("GET", this.path(), { query: listParams(query) });
  }

  get<const P extends ExpandPath<R> = never>(uid: string, opts: { expand?: P[] } = {}): Promise<Read<R, P>> {
    return this.http.json("GET", this.path(`/${encodeURIComponent(uid)}`), { query: listParams({ expand: opts.expand }) });
  }

  /** The row as the writer may read it afterwards (`{ uid }` alone if it may not read it). */
  create<const P extends ExpandPath<R> = never>(values: Writable<R>, opts: { expand?: P[] } = {}): Promise<Read<R, P>> {
    return this.http.json("POST", this.path(), { json: values, query: listParams({ expand: opts.expand }) });
  }

  update<const P extends ExpandPath<R> = never>(uid: string, patch: Writable<R>, opts: { expand?: P[] } = {}): Promise<Read<R, P>> {
    return this.http.json("PATCH", this.path(`/${encodeURIComponent(uid)}`), { json: patch, query: listParams({ expand: opts.expand }) });
  }

  async delete(uid: string): Promise<void> {
    await this.http.send("DELETE", this.path(`/${encodeURIComponent(uid)}`));
  }

  /** Sets `set` on every row matching `filter` (a filter is required); how many changed. */
  updateWhere(filter: Filter<R>, set: Writable<R>): Promise<{ count: number }> {
    return this.http.json("PATCH", this.path(), { query: listParams({ filter }), json: { set } });
  }

  deleteWhere(filter: Filter<R>): Promise<{ count: number }> {
    return this.http.json("DELETE", this.path(), { query: listParams({ filter }) });
  }

  /** Imports CSV (first line names columns), all or nothing. */
  importCsv(csv: string | Blob): Promise<{ inserted: number }> {
    return this.http.json("POST", this.path("/import"), { body: csv, contentType: "text/csv" });
  }

  subscribe(opts: StreamOptions<ChangeEvent<R>> = {}): Subscription {
    return new Stream(this.http, this.path("/subscribe"), {}, opts);
  }

  /** The rows of a list query, kept current: `onChange` gets them after every change. */
  liveQuery(query: LiveQueryOptions<R>, onChange: (rows: (R & Expanded)[]) => void = () => undefined): LiveQuery<R> {
    return new Live<R>({
      list: (q) => this.list(q),
      subscribe: (opts) => this.subscribe(opts),
      kinds: (fresh) => this.client.kinds(this.name, fresh),
    }, query, onChange);
  }
}

/** Orgs the signed-in user creates (contract 3a; the app's `orgCreation` must be "users"). */
export class Orgs {
  constructor(private readonly client: Client<never>) {}

  /** Creates an org owned by the user (with the app's `orgOwnerRoles`) and signs in to it. */
  async create(org: { name: string }): Promise<{ uid: string; name: string }> {
    const answer = await this.client.http.json<TokenPair & { org: { uid: string; name: string } }>(
      "POST", `/${encodeURIComponent(this.client.app)}/orgs`, { json: org });
    this.client.auth.setSession(answer);
    return answer.org;
  }
}

export class Client<T extends TableMap<T> = Untyped> {
  readonly http: Http;
  readonly auth: Auth;
  readonly app: string;
  /** The signed-in member's org: members, invitations, API keys (section 3a, 3b). */
  readonly org: Org;
  readonly orgs: Orgs = new Orgs(this as unknown as Client<never>);
  private schema: Promise<Record<string, { properties?: Record<string, unknown> }>> | null = null;

  constructor(opts: ClientOptions) {
    this.app = opts.app;
    this.http = new Http(opts.url, opts.fetch);
    this.auth = new Auth(this.http, opts.app, opts);
    const key = opts.apiKey;
    this.http.tokens = key ? { token: async () => key, expired: async () => null } : this.auth;
    this.org = new Org(this.http, opts.app);
  }

  table<K extends keyof T & string>(name: K): Table<T[K]> {
    return new Table<T[K]>(this as unknown as Client<never>, name);
  }

  /** One stream for several tables (section 5b): one connection, one position for all. */
  subscribe<K extends keyof T & string>(tables: K[], opts: StreamOptions<EventOf<T, K>> = {}): Subscription {
    return new Stream(this.http, `/${encodeURIComponent(this.app)}/subscribe`, { tables: tables.join(",") }, opts);
  }

  /** Column kinds of a table, from the app's OpenAPI (read once, again after a schema change). */
  async kinds(table: string, fresh = false): Promise<Kinds> {
    if (!this.schema || fresh) {
      this.schema = this.http.json<{ components?: { schemas?: Record<string, { properties?: Record<string, unknown> }> } }>(
        "GET", `/${encodeURIComponent(this.app)}/openapi.json`).then((doc) => doc.components?.schemas ?? {});
      this.schema.catch(() => (this.schema = null));
    }
    return kindsOf((await this.schema)[table]);
  }
}

/** A client for one app. Pass the app's generated table types to type every call:
 * `createClient<AcmeTables>({ url, app: "acme" })`. */
export function createClient<T extends TableMap<T> = Untyped>(opts: ClientOptions): Client<T> {
  return new Client<T>(opts);
}
