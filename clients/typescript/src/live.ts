/** Live queries: the rows of a list query, kept current from the table's stream so that they
 * converge to exactly what a fresh list would return, through drops, reauth, bulk resyncs and
 * server restarts.
 *
 * How: the stream opens first and learns its position (so nothing committed later can be
 * missed); the list is fetched while events are held back; then the held events are applied
 * on top (an event whose row is older than the listed one, by `updatedAt`, is dropped). From
 * then on every insert and update is placed by `uid` in the query's order, deletes remove by
 * `rowUid`, and rows that stop matching the filter leave. A `resync`, a filter or order the
 * client cannot judge itself (see match.ts), a window with a `limit` losing a row it cannot
 * refill from what it holds, or, with `expand`, a row the stream sent unexpanded (the server's
 * streams do not expand yet): each refetches (while events are held back again). */

import { AuthoricError } from "./errors.js";
import { compareRows, matches, type Kinds } from "./match.js";
import type { Subscription } from "./stream.js";
import type { ChangeEvent, Expanded, ListQuery, Page, Status } from "./types.js";

export interface LiveQueryOptions<R> extends Omit<ListQuery<R>, "after" | "count"> {
  onError?: (error: AuthoricError) => void;
  onStatus?: (status: Status) => void;
}

export interface LiveQuery<R> {
  /** The rows now, in the query's order. */
  readonly rows: (R & Expanded)[];
  /** Resolves with the first rows (rejects if the query fails before it has any). */
  readonly ready: Promise<(R & Expanded)[]>;
  /** Refetches now (and applies what arrives meanwhile). */
  refetch(): Promise<void>;
  close(): void;
}

/** What a live query needs of its table. */
export interface LiveSource<R> {
  list(query: ListQuery<R>): Promise<Page<R>>;
  subscribe(opts: { expand?: string[]; onEvent: (e: ChangeEvent<R>) => void; onResync: (reason: string) => void;
    onStatus: (s: Status) => void; onError: (e: AuthoricError) => void }): Subscription;
  kinds(fresh?: boolean): Promise<Kinds>;
}

type Row = Record<string, unknown> & { uid: string };

const MAX_PAGE = 1000;

export class Live<R> implements LiveQuery<R> {
  rows: (R & Expanded)[] = [];
  readonly ready: Promise<(R & Expanded)[]>;
  private complete = false;
  private held: ChangeEvent<R>[] | null = [];
  private fetching: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private positioned = false;
  private kinds: Kinds = {};
  private notifying = false;
  private settle!: [(rows: (R & Expanded)[]) => void, (err: unknown) => void];
  private readonly sub: Subscription;

  constructor(private readonly source: LiveSource<R>, private readonly query: LiveQueryOptions<R>,
              private readonly onChange: (rows: (R & Expanded)[]) => void) {
    this.ready = new Promise((resolve, reject) => (this.settle = [resolve, reject]));
    this.ready.catch(() => undefined);
    this.sub = source.subscribe({
      expand: query.expand as string[] | undefined,
      onEvent: (e) => {
        if (this.held) this.held.push(e);
        else {
          this.apply(e);
          this.notify();
        }
      },
      onResync: (reason) => void this.refetch(reason === "schema_change"),
      onStatus: (status) => {
        // A stream that had no position when it dropped cannot resume without a gap.
        if (status === "reconnecting") this.positioned = this.sub?.lastEventId !== undefined;
        if (status === "live" && !this.positioned) void this.refetch(true);
        query.onStatus?.(status);
      },
      onError: (err) => this.fail(err),
    });
  }

  close(): void {
    this.closed = true;
    this.sub.close();
  }

  refetch(reloadKinds = false): Promise<void> {
    if (this.fetching) {
      this.again = true;
      return this.fetching;
    }
    this.held ??= [];
    this.fetching = this.fetchLoop(reloadKinds).finally(() => (this.fetching = null));
    return this.fetching;
  }

  private fail(err: AuthoricError): void {
    this.query.onError?.(err);
    this.settle[1](err);
  }

  private async fetchLoop(reloadKinds: boolean): Promise<void> {
    for (let attempt = 0; !this.closed;) {
      this.again = false;
      this.held ??= [];
      let rows: (R & Expanded)[];
      try {
        if (reloadKinds || !Object.keys(this.kinds).length) this.kinds = await this.source.kinds(reloadKinds).catch(() => ({}));
        reloadKinds = false;
        rows = await this.load();
      } catch (err) {
        const error = err as AuthoricError;
        if (this.closed) return;
        if (error.status !== 0 && !(error.status >= 500)) {
          this.fail(error);
          this.close();
          return;
        }
        await new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** attempt++)));
        continue;
      }
      if (this.closed || this.again) continue;
      this.rows = rows;
      const held = this.held;
      this.held = null;
      for (const event of held) this.apply(event);
      if (!this.again) break;
    }
    if (this.closed) return;
    this.onChange(this.rows.slice());
    this.settle[0](this.rows);
  }

  private async load(): Promise<(R & Expanded)[]> {
    const { filter, order, limit, expand } = this.query;
    if (limit) {
      const page = await this.source.list({ filter, order, limit, expand });
      this.complete = page.next === null;
      return page.items;
    }
    const rows: (R & Expanded)[] = [];
    let after: string | null = null;
    do {
      const page: Page<R> = await this.source.list({ filter, order, limit: MAX_PAGE, expand, after });
      rows.push(...page.items);
      after = page.next;
    } while (after);
    this.complete = true;
    return rows;
  }

  private notify(): void {
    if (this.notifying || this.held || this.closed) return;
    this.notifying = true;
    queueMicrotask(() => {
      this.notifying = false;
      if (!this.held && !this.closed) this.onChange(this.rows.slice());
    });
  }

  private apply(event: ChangeEvent<R>): void {
    const rows = this.rows as unknown as Row[];
    const uid = event.op === "delete" ? event.rowUid : (event.row as unknown as Row).uid;
    const at = rows.findIndex((r) => r.uid === uid);
    if (event.op === "delete") {
      if (at >= 0) this.remove(at);
      return;
    }
    const row = event.row as unknown as Row;
    if (at >= 0 && newer(rows[at], row)) return; // an event older than the listed row
    if (this.query.expand?.length && !("expand" in row)) {
      void this.refetch(); // the stream sent the row unexpanded: only a list expands it
      return;
    }
    const match = matches(this.query.filter as Record<string, unknown> | undefined, row, this.kinds);
    if (match === undefined) {
      if (at >= 0) rows[at] = row;
      void this.refetch();
      return;
    }
    if (!match) {
      if (at >= 0) this.remove(at);
      return;
    }
    if (at >= 0) rows.splice(at, 1);
    const order = (this.query.order as string | undefined) ?? "uid";
    let pos = 0;
    for (; pos < rows.length; pos++) {
      const c = compareRows(order, row, rows[pos], this.kinds);
      if (c === undefined) {
        rows.splice(at >= 0 ? at : rows.length, 0, row);
        void this.refetch();
        return;
      }
      if (c < 0) break;
    }
    if (!this.complete && pos === rows.length) {
      if (at >= 0) void this.refetch(); // it moved past the end of the window: refill
      return;
    }
    rows.splice(pos, 0, row);
    const limit = this.query.limit;
    if (limit && rows.length > limit) {
      rows.pop();
      this.complete = false;
    }
  }

  private remove(at: number): void {
    this.rows.splice(at, 1);
    if (!this.complete) void this.refetch(); // refill the window
  }
}

/** true when `a` was written after `b` (by `updatedAt`). */
function newer(a: Row, b: Row): boolean {
  const x = String(a.updatedAt ?? "");
  const y = String(b.updatedAt ?? "");
  return compareRows("updatedAt", { uid: "", updatedAt: x }, { uid: "", updatedAt: y }, { updatedAt: "timestamp" }) === 1;
}
