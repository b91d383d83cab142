// Reference cells named to people: a reference holds the other row's uid (`vendor_uid`); the
// grid shows that row's display column instead, read once per page for each referenced table,
// and links to the row in its own table.
import { fieldOf, type Column, type Row } from './types';

/** Labels already read: table → uid → label, or null when the row cannot be read (hidden or gone). */
export type LabelCache = Map<string, Map<string, string | null>>;

const MAX_LOOKUP = 1000; // the API's largest page

/** For each referenced table, the uids on these rows whose labels are not known yet. */
export function missingReferences(columns: readonly Column[], rows: readonly Row[], cache: LabelCache): Map<string, string[]> {
  const wanted = new Map<string, Set<string>>();
  for (const column of columns) {
    if (column.type !== 'reference' || !column.references) continue;
    const known = cache.get(column.references);
    const field = fieldOf(column);
    for (const row of rows) {
      const uid = row[field];
      if (typeof uid !== 'string' || !uid || known?.has(uid)) continue;
      const set = wanted.get(column.references) ?? new Set<string>();
      if (set.size < MAX_LOOKUP) set.add(uid);
      wanted.set(column.references, set);
    }
  }
  return new Map([...wanted].map(([table, uids]) => [table, [...uids]]));
}

/** Records what a lookup returned: a label for each row read, null for each uid not returned. */
export function remember(cache: LabelCache, table: string, asked: readonly string[],
                         found: ReadonlyMap<string, string>): void {
  const known = cache.get(table) ?? new Map<string, string | null>();
  for (const uid of asked) known.set(uid, found.get(uid) ?? null);
  cache.set(table, known);
}

/** The console route showing one row of a table in the data grid. */
export function rowLink(app: string, table: string, uid: string): string {
  return `#/apps/${encodeURIComponent(app)}/data/${encodeURIComponent(table)}?row=${encodeURIComponent(uid)}`;
}

/** The row a data route names (`?row=<uid>`), if any. */
export function linkedRow(querystring: string | undefined): string | null {
  return new URLSearchParams(querystring ?? '').get('row') || null;
}
