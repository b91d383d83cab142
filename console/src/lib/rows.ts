// Pure helpers for the data grid: reading an edited cell as the column's JSON value, applying
// live events to the loaded rows, and writing rows as CSV for export.
import type { ChangeEvent } from './feed';
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

/** Applies one live event to a list of rows; says which row flashed and how. */
export function applyEvent(rows: Row[], event: ChangeEvent): { rows: Row[]; flash: 'insert' | 'update' | 'delete' | null } {
  if (event.op === 'delete') {
    const found = rows.some((r) => r.uid === event.rowUid);
    return { rows: rows.filter((r) => r.uid !== event.rowUid), flash: found ? 'delete' : null };
  }
  const index = rows.findIndex((r) => r.uid === event.row.uid);
  if (index === -1) return { rows: [event.row, ...rows], flash: 'insert' };
  const next = [...rows];
  next[index] = event.row;
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
