/** Row and query types. `createClient<Tables>()` takes an interface mapping table names to row
 * interfaces (as `authoric typegen --lang ts` writes them); every call is typed from it. Without
 * one, rows are loose records. */

/** What every row has; a generated row interface satisfies it. */
export interface RowBase {
  uid: string;
}

/** A row of a table the client was not told the type of. */
export interface UntypedRow {
  uid: string;
  createdAt: string;
  updatedAt: string;
  [column: string]: unknown;
}

export type Untyped = Record<string, UntypedRow>;

/** A map of table names to row types: `{ invoices: InvoicesRow; vendors: VendorsRow }`. */
export type TableMap<T> = { [K in keyof T]: RowBase };

type ServerOwned = "uid" | "createdAt" | "updatedAt" | "expand";

/** The columns a create or update may set: the row without the server's fields. */
export type Writable<R> = Partial<Omit<R, ServerOwned>>;

type Loose<R> = string extends keyof R ? true : false;
type Column<R> = Exclude<keyof R, "expand"> & string;

/** Operators of a filter (contract section 4). */
export interface Ops<V> {
  eq?: V | null;
  ne?: V | null;
  lt?: V;
  lte?: V;
  gt?: V;
  gte?: V;
  in?: V[];
  nin?: V[];
  like?: string;
  is_null?: boolean;
  search?: string;
}

/** A filter: `{ status: "paid" }`, `{ amount: { gte: "100" } }`, `{ or: [...] }`. */
export type Filter<R> = { [K in Column<R>]?: R[K] | Ops<NonNullable<R[K]>> } & {
  and?: Filter<R>[];
  or?: Filter<R>[];
  not?: Filter<R>;
};

/** `"createdAt"` or `"-createdAt"`: a column, `-` for descending. */
export type Order<R> = Column<R> | `-${Column<R>}`;

type RefName<R> = { [K in keyof R]: K extends `${infer N}_uid` ? N : never }[keyof R];

/** A reference column to expand (its name without `_uid`), or a dotted path of two. */
export type ExpandPath<R> = Loose<R> extends true ? string : RefName<R> | `${RefName<R> & string}.${string}`;

/** Rows read with `expand` carry the referenced rows under `expand`. */
export type Expanded = { expand?: Record<string, (Record<string, unknown> & { uid: string }) | null> };

type Head<P> = P extends `${infer H}.${string}` ? H : P;
type Tail<P, H extends string> = P extends `${H}.${infer T}` ? T : never;

/** What a read with the expand paths `P` carries: `expand.<name>` for each named reference,
 * the referenced row or null, a second level nested inside. A reference column does not say
 * which table it points to, so the expanded row itself is typed loosely (`UntypedRow`). */
export type ExpandOf<P extends string> = [P] extends [never] ? unknown
  : { expand: { [H in Head<P>]: (UntypedRow & ExpandOf<Tail<P, H>>) | null } };

/** A row as read with the expand paths `P` (none: the row, `expand` untyped). */
export type Read<R, P extends string = never> = [P] extends [never] ? R & Expanded : R & ExpandOf<P>;

export interface ListQuery<R, P extends string = ExpandPath<R>> {
  filter?: Filter<R>;
  order?: Order<R>;
  /** 1..1000; the server's default is 50. */
  limit?: number;
  after?: string | null;
  expand?: P[];
  /** Adds `total`: how many rows match the filter, the page aside (`true` is `"exact"`). */
  count?: boolean | "exact";
}

export interface Page<R, P extends string = never> {
  items: Read<R, P>[];
  next: string | null;
  /** With `count`: every matching row, the page's `limit` and `after` aside. */
  total?: number;
}

/** One change, flat: `row` for insert and update, `rowUid` for delete. */
export type ChangeEvent<R = UntypedRow, T extends string = string> =
  | { id: string; op: "insert" | "update"; table: T; row: R & Expanded; rowUid?: undefined }
  | { id: string; op: "delete"; table: T; rowUid: string; row?: undefined };

/** The events of a stream over several tables of a typed app. */
export type EventOf<T, K extends keyof T> = { [N in K]: ChangeEvent<T[N], N & string> }[K];

export type Status = "connecting" | "live" | "reconnecting" | "closed";

export interface ResyncInfo {
  table?: string;
  lastId?: number;
}
