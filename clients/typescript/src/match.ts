/** Judging rows on the client, for live queries: does a row match a filter, and where does it
 * sort. Only what the client can decide exactly as PostgreSQL would is decided here; for
 * anything else the answer is `undefined`, and the live query refetches instead.
 *
 * Decided here, from the column types the app's OpenAPI gives (section 6): `eq`, `ne`, `in`,
 * `nin`, `is_null` on every type but json; `lt`, `lte`, `gt`, `gte` on integer, numeric,
 * boolean, date, timestamp and uuid columns; `and`, `or`, `not`. Not decided (refetch): `like`,
 * `search`, `$principal` values, ranges on text and select columns (the database's collation
 * orders text), json columns, redacted values. Placing rows by `order` follows the same split. */

export type ColumnKind = "integer" | "numeric" | "boolean" | "timestamp" | "date" | "uuid" | "text" | "json";
export type Kinds = Record<string, ColumnKind>;

/** Column kinds of one table's row schema in the app's OpenAPI document. */
export function kindsOf(schema: { properties?: Record<string, unknown> } | undefined): Kinds {
  const kinds: Kinds = {};
  for (const [name, raw] of Object.entries(schema?.properties ?? {})) {
    const s = raw as { type?: string; format?: string; anyOf?: { type?: string; format?: string; enum?: unknown[] }[] };
    const base = s.anyOf ? s.anyOf.find((a) => a.type !== "null" && !(a.enum?.[0] === "[redacted]")) : s;
    kinds[name] = !base?.type ? "json"
      : base.type === "integer" ? "integer"
      : base.type === "boolean" ? "boolean"
      : base.format === "decimal" ? "numeric"
      : base.format === "date-time" ? "timestamp"
      : base.format === "date" ? "date"
      : base.format === "uuid" ? "uuid"
      : base.type === "string" ? "text" : "json";
  }
  return kinds;
}

/** A comparable key for a value of a kind, or undefined when the client cannot order it. */
function key(kind: ColumnKind, value: unknown): [bigint, bigint] | string | number | undefined {
  if (typeof value === "string" && value === "[redacted]" && kind !== "text") return undefined;
  switch (kind) {
    case "integer":
      return typeof value === "number" ? value : typeof value === "string" && /^-?\d+$/.test(value) ? Number(value) : undefined;
    case "boolean":
      return typeof value === "boolean" ? Number(value) : undefined;
    case "numeric":
      return decimal(value);
    case "timestamp":
      return instant(value);
    case "date":
      return typeof value === "string" && /^\d{4}-\d{2}-\d{2}$/.test(value) ? value : undefined;
    case "uuid":
      return typeof value === "string" ? value.toLowerCase() : undefined;
    default:
      return undefined;
  }
}

/** A decimal as [scaled integer, scale 10^-18]: exact for the values a numeric column holds. */
function decimal(value: unknown): [bigint, bigint] | undefined {
  const text = typeof value === "number" && Number.isFinite(value) ? String(value) : value;
  if (typeof text !== "string") return undefined;
  const m = /^([-+]?)(\d*)(?:\.(\d*))?$/.exec(text.trim());
  if (!m || (!m[2] && !m[3])) return undefined;
  const frac = (m[3] ?? "").padEnd(18, "0").slice(0, 18);
  const n = BigInt((m[2] || "0") + frac) * (m[1] === "-" ? -1n : 1n);
  return [n, 0n];
}

/** A timestamp as [epoch seconds, microseconds]. */
function instant(value: unknown): [bigint, bigint] | undefined {
  if (typeof value !== "string") return undefined;
  const m = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})$/i.exec(value);
  if (!m) return undefined;
  const ms = Date.parse(m[1] + m[3]);
  if (Number.isNaN(ms)) return undefined;
  return [BigInt(ms / 1000), BigInt((m[2] ?? "").padEnd(6, "0").slice(0, 6))];
}

function cmpKeys(a: NonNullable<ReturnType<typeof key>>, b: NonNullable<ReturnType<typeof key>>): number {
  if (Array.isArray(a) && Array.isArray(b)) return a[0] !== b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] === b[1] ? 0 : a[1] < b[1] ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Compares two values of a column; undefined when the client cannot. */
function compare(kind: ColumnKind, a: unknown, b: unknown): number | undefined {
  if (kind === "text" && typeof a === "string" && typeof b === "string" && a === b && a !== "[redacted]") return 0;
  const ka = key(kind, a);
  const kb = key(kind, b);
  return ka === undefined || kb === undefined ? undefined : cmpKeys(ka, kb);
}

function equal(kind: ColumnKind, a: unknown, b: unknown): boolean | undefined {
  if (kind === "json") return undefined;
  if (kind === "text") return typeof a === "string" && typeof b === "string" && a !== "[redacted]" ? a === b : undefined;
  const c = compare(kind, a, b);
  return c === undefined ? undefined : c === 0;
}

type Tri = boolean | undefined;

function all(results: Tri[]): Tri {
  return results.includes(false) ? false : results.includes(undefined) ? undefined : true;
}

function isOps(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Does `row` match `filter`: true, false, or undefined (the client cannot tell). */
export function matches(filter: Record<string, unknown> | undefined, row: Record<string, unknown>, kinds: Kinds): Tri {
  if (!filter) return true;
  const results: Tri[] = [];
  for (const [name, cond] of Object.entries(filter)) {
    if (name === "and" && Array.isArray(cond)) results.push(all(cond.map((f) => matches(f, row, kinds))));
    else if (name === "or" && Array.isArray(cond)) {
      const parts = cond.map((f) => matches(f, row, kinds));
      results.push(parts.includes(true) ? true : parts.includes(undefined) ? undefined : false);
    } else if (name === "not" && isOps(cond)) {
      const inner = matches(cond, row, kinds);
      results.push(inner === undefined ? undefined : !inner);
    } else {
      const kind = kinds[name];
      if (!kind) return undefined;
      const ops = isOps(cond) && kind !== "json" ? cond : { eq: cond };
      for (const [op, arg] of Object.entries(ops)) results.push(test(kind, op, row[name], arg));
    }
  }
  return all(results);
}

function test(kind: ColumnKind, op: string, value: unknown, arg: unknown): Tri {
  if (isOps(arg)) return undefined; // {"$principal": ...}
  if (op === "is_null") return typeof arg === "boolean" ? (value === null) === arg : undefined;
  if (value === "[redacted]") return undefined;
  if (arg === null && (op === "eq" || op === "ne")) return (value === null) === (op === "eq");
  if (value === null || value === undefined) return false; // SQL: a comparison with NULL is not true
  if (op === "eq") return equal(kind, value, arg);
  if (op === "ne") {
    const eq = equal(kind, value, arg);
    return eq === undefined ? undefined : !eq;
  }
  if (op === "in" || op === "nin") {
    if (!Array.isArray(arg)) return undefined;
    const hits = arg.map((a) => equal(kind, value, a));
    const found: Tri = hits.includes(true) ? true : hits.includes(undefined) ? undefined : false;
    return found === undefined ? undefined : op === "in" ? found : !found;
  }
  if (op === "lt" || op === "lte" || op === "gt" || op === "gte") {
    const c = compare(kind, value, arg);
    if (c === undefined || kind === "text") return undefined;
    return op === "lt" ? c < 0 : op === "lte" ? c <= 0 : op === "gt" ? c > 0 : c >= 0;
  }
  return undefined; // like, search, anything newer
}

/** Compares two rows in the order `spec` ("-createdAt"): NULLs last, then `uid`, as the server
 * sorts; undefined when the client cannot. */
export function compareRows(spec: string, a: Record<string, unknown>, b: Record<string, unknown>, kinds: Kinds): number | undefined {
  const desc = spec.startsWith("-");
  const name = desc ? spec.slice(1) : spec;
  const kind = kinds[name];
  const sign = desc ? -1 : 1;
  const va = a[name];
  const vb = b[name];
  let c: number | undefined;
  if (va === null || vb === null) c = va === vb ? 0 : va === null ? 1 : -1; // NULLs last either way
  else {
    c = kind ? compare(kind, va, vb) : undefined;
    if (c === undefined) return undefined;
    c *= sign;
  }
  if (c !== 0) return c;
  const u = String(a.uid).toLowerCase();
  const v = String(b.uid).toLowerCase();
  return u === v ? 0 : (u < v ? -1 : 1) * sign;
}
