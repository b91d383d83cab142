// How a row is named to people: by its table's display column (contract section 2,
// `displayColumn`), or, when the table has none, by a short summary of its first values.
import { fieldOf, type Row, type TableDef } from './types';

const SUMMARY_FIELDS = 3;
const SUMMARY_LENGTH = 80;

/** The display column of `def`: the server's `displayColumn` when the definition carries the
 *  field (null: none), else the contract's default, the first required unique text column. */
export function displayColumnOf(def: Pick<TableDef, 'columns' | 'displayColumn'>): string | null {
  if (def.displayColumn !== undefined) return def.displayColumn;
  return def.columns.find((c) => c.type === 'text' && c.required && c.unique)?.name ?? null;
}

/** A value as a cell shows it: empty for null, JSON for objects and lists, else its text. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

const text = cellText;

function clip(value: string, length = SUMMARY_LENGTH): string {
  return value.length > length ? `${value.slice(0, length - 1)}…` : value;
}

/** A row's name for people: its display column's value, or `col: value · ...` of its first
 *  non-empty columns, or its uid when it has none. */
export function rowLabel(row: Row, def: Pick<TableDef, 'columns' | 'displayColumn'>): string {
  const display = displayColumnOf(def);
  if (display) {
    const value = text(row[display]);
    if (value) return clip(value);
  }
  const parts = def.columns
    .map((c) => [fieldOf(c), text(row[fieldOf(c)])] as const)
    .filter(([, value]) => value !== '')
    .slice(0, SUMMARY_FIELDS)
    .map(([field, value]) => `${field}: ${clip(value, 32)}`);
  return parts.length ? clip(parts.join(' · ')) : row.uid;
}

/** The first `shown` of `uids`, and how many are left out. */
export function firstOf<T>(items: readonly T[], shown: number): { listed: T[]; more: number } {
  const listed = items.slice(0, Math.max(0, shown));
  return { listed, more: items.length - listed.length };
}
