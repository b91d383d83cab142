// Pure helpers for the data grid: reading an edited cell as the column's JSON value, applying
// live events to the loaded rows, and writing rows as CSV for export.
import type { ChangeEvent } from '@authoric/client';
import { type Column, fieldOf, type Row } from './types';

/** What an edited cell sends: the API's JSON for the column type (numerics stay strings). */
export function cellValue(column: Column | undefined, raw: unknown): unknown {
  if (raw === '' || raw === null || raw === undefined) return null;
  if (!column) return raw;
  switch (column.type) {
    case 'integer':
      return typeof raw === 'string' && /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
    case 'boolean':
      if (raw === 'true') return true;
      if (raw === 'false') return false;
      return raw;
    case 'json':
      if (typeof raw !== 'string') return raw;
      try {
        return JSON.parse(raw);
      } catch {
        return raw;
      }
    default:
      return typeof raw === 'string' ? raw : raw;
  }
}

export function columnByField(columns: Column[], field: string): Column | undefined {
  return columns.find((c) => fieldOf(c) === field);
}

/** The fields whose values differ between two versions of a row (server fields left out). */
export function changedFields(before: Row, after: Row): string[] {
  const skip = new Set(['updatedAt', 'createdAt']);
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].filter((k) => !skip.has(k) && JSON.stringify(before[k]) !== JSON.stringify(after[k]));
}

/** A list order as the API takes it: a field, `-` for descending (section 4, `?order=`). */
export interface Ordering { field: string; descending: boolean }

export function parseOrder(order: string): Ordering {
  return order.startsWith('-') ? { field: order.slice(1), descending: true } : { field: order, descending: false };
}

/** Compares two values of one field as PostgreSQL orders them (numbers as numbers, numerics
 *  given as strings too; text by code point, as the C collation does); null is not passed. */
function compareValues(a: unknown, b: unknown): number {
  const numeric = (v: unknown) => typeof v === 'number' || (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v));
  if (numeric(a) && numeric(b)) {
    const d = Number(a) - Number(b);
    if (d !== 0) return d;
  }
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  const x = typeof a === 'object' ? JSON.stringify(a) : String(a);
  const y = typeof b === 'object' ? JSON.stringify(b) : String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The keyset order of section 4: the field (nulls last, either way), then uid, same direction. */
export function compareRows(a: Row, b: Row, ordering: Ordering): number {
  const x = a[ordering.field];
  const y = b[ordering.field];
  const xNull = x === null || x === undefined;
  const yNull = y === null || y === undefined;
  if (xNull !== yNull) return xNull ? 1 : -1;
  const sign = ordering.descending ? -1 : 1;
  const byField = xNull ? 0 : compareValues(x, y) * sign;
  if (byField !== 0 || ordering.field === 'uid') return byField;
  return compareValues(a.uid, b.uid) * sign;
}

/** Where a new row goes among `rows` (already in `ordering`): its index, or null when it
 *  belongs to an earlier page (`firstPage` false, before the first row) or a later one
 *  (`lastPage` false, after the last row). */
export function insertionIndex(rows: readonly Row[], row: Row, ordering: Ordering,
                               page: { firstPage: boolean; lastPage: boolean }): number | null {
  if (!rows.length) return 0;
  let index = rows.findIndex((r) => compareRows(row, r, ordering) < 0);
  if (index === -1) index = rows.length;
  if (index === 0 && !page.firstPage) return null;
  if (index === rows.length && !page.lastPage) return null;
  return index;
}

export type Applied =
  | { rows: Row[]; flash: 'insert'; index: number }
  | { rows: Row[]; flash: 'update' | 'delete' | null };

/** Applies one live event to the loaded page: an insert lands where `ordering` puts it (or
 *  nowhere, when it belongs to another page), an update replaces its row, a delete drops it. */
export function applyEvent(rows: Row[], event: ChangeEvent<Row>, ordering: Ordering = { field: 'uid', descending: false },
                           page = { firstPage: true, lastPage: true }): Applied {
  if (event.op === 'delete') {
    const found = rows.some((r) => r.uid === event.rowUid);
    return { rows: rows.filter((r) => r.uid !== event.rowUid), flash: found ? 'delete' : null };
  }
  const existing = rows.findIndex((r) => r.uid === event.row.uid);
  if (existing === -1) {
    const index = insertionIndex(rows, event.row, ordering, page);
    if (index === null) return { rows, flash: null };
    return { rows: [...rows.slice(0, index), event.row, ...rows.slice(index)], flash: 'insert', index };
  }
  const next = [...rows];
  next[existing] = event.row;
  return { rows: next, flash: 'update' };
}

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function toCsv(fields: string[], rows: Row[]): string {
  const lines = [fields.map(csvField).join(',')];
  for (const row of rows) lines.push(fields.map((f) => csvField(row[f])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
