// Indexes of a table (contract section 2, **Indexes**) as the console edits them: the columns
// typed as the API names them (`vendor, -createdAt`), checked before anything is sent, and
// described in words for the confirmation and the list.
import type { Index, TableDef } from './types';

export const MAX_INDEX_COLUMNS = 8;
const PLATFORM_FIELDS = ['uid', 'createdAt', 'updatedAt'];
const SEARCHABLE = new Set(['text', 'select']);

export interface IndexDraft {
  name: string;
  columns: string;
  unique: boolean;
  kind: 'btree' | 'search';
}

export interface IndexSpec {
  columns: string[];
  unique: boolean;
  kind: 'btree' | 'search';
}

/** The columns an index may name: the table's (a reference without `_uid`) and the platform's. */
export function indexableColumns(def: Pick<TableDef, 'columns'>): string[] {
  return [...def.columns.map((c) => c.name), ...PLATFORM_FIELDS];
}

/** The spec a draft sends, or the reason it cannot be sent. */
export function indexSpec(def: Pick<TableDef, 'columns'>, draft: IndexDraft): { spec: IndexSpec } | { error: string } {
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(draft.name.trim())) {
    return { error: 'An index name is lower case letters, digits and _, starting with a letter.' };
  }
  const columns = draft.columns.split(/[,\s]+/).map((c) => c.trim()).filter(Boolean);
  if (!columns.length) return { error: 'Name at least one column.' };
  if (columns.length > MAX_INDEX_COLUMNS) return { error: `An index holds at most ${MAX_INDEX_COLUMNS} columns.` };
  const known = indexableColumns(def);
  const bare = columns.map((c) => c.replace(/^-/, ''));
  const unknown = bare.find((c) => !known.includes(c));
  if (unknown) return { error: `"${unknown}" is not a column of this table.` };
  if (new Set(bare).size !== bare.length) return { error: 'Name each column once.' };
  if (draft.kind === 'search') {
    if (draft.unique) return { error: 'A search index cannot be unique.' };
    const bad = columns.find((c) => c.startsWith('-') || !SEARCHABLE.has(def.columns.find((d) => d.name === c)?.type ?? ''));
    if (bad) return { error: `A search index holds text columns only, ascending: not "${bad}".` };
  }
  return { spec: { columns, unique: draft.unique, kind: draft.kind } };
}

/** `vendor ↑, createdAt ↓` */
export function describeColumns(columns: readonly string[]): string {
  return columns.map((c) => (c.startsWith('-') ? `${c.slice(1)} ↓` : `${c} ↑`)).join(', ');
}

export function describeIndex(index: Pick<Index, 'columns' | 'unique' | 'kind'>): string {
  if (index.kind === 'search') return `full-text search over ${index.columns.join(', ')}`;
  return `${index.unique ? 'unique ' : ''}on ${describeColumns(index.columns)}`;
}

/** What adding the index will do, for the confirmation. */
export function describeNewIndex(table: string, name: string, spec: IndexSpec): string[] {
  return [
    `Add index "${name}" to "${table}": ${describeIndex(spec)}.`,
    spec.unique ? 'Unique among the rows of each org: if two rows of one org share the values, the build fails and lists them.'
      : 'Within each org: the index leads with the org, as every query does.',
    'Built in the background without blocking reads or writes; its state shows here.',
  ];
}

/** The unique indexes a table's columns carry (a column declared `unique`): made with the
 *  table, not through the indexes routes, so the list of indexes does not hold them. Shown
 *  beside it, since they serve filters and orders as any index does. */
export function columnUniques(def: Pick<TableDef, 'columns'>): { column: string; text: string }[] {
  return def.columns.filter((c) => c.unique).map((c) => ({
    column: c.name, text: `unique on ${describeColumns([c.name])} (the column's own setting)`,
  }));
}

/** Whether any index is still building (the list is read again until none is). */
export function anyBuilding(indexes: readonly Pick<Index, 'state'>[]): boolean {
  return indexes.some((i) => i.state === 'building');
}

/** The uids of the rows a failed unique build lists (`error.details.rows`). */
export function failedRows(index: Pick<Index, 'error'>): string[] {
  const rows = index.error?.details?.rows;
  return Array.isArray(rows) ? rows.map((r) => String((r as { uid?: unknown }).uid ?? '')).filter(Boolean) : [];
}
