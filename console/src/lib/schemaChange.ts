// Renaming and retyping columns, a select's options and the display column (contract section 2,
// **Schema changes**): the PATCH a column edit sends, the confirmation's words, and a preview of
// the rows that could not take a change. Which conversions exist is the server's table (read
// once, lib/columnTypes); the preview reads the rows and checks them with the contract's
// conversion rules; the server checks every row again in the PATCH's one
// transaction and, if any fails, changes nothing and lists them (422, `details.rows`).
import type { ColumnTypes } from '@authoric/client/admin';
import { fieldOf, type Column, type ColumnType, type Row, type TableDef } from './types';

export const MAX_LISTED = 100;

/** The types a column of type `from` may become, itself first, from the server's table
 *  (GET /admin/column-types, lib/columnTypes); only `from` until that table is read. */
export function conversionsFrom(table: Pick<ColumnTypes, 'conversions'> | null, from: ColumnType): ColumnType[] {
  return table?.conversions[from] ?? [from];
}

/** A column as the operator edits it: its new name and its new settings. */
export interface ColumnEdit {
  name: string;
  type: ColumnType;
  required: boolean;
  unique: boolean;
  default: string;
  options: string[];
}

export function editOf(column: Column): ColumnEdit {
  return {
    name: column.name, type: column.type, required: Boolean(column.required), unique: Boolean(column.unique),
    default: column.default === undefined || column.default === null ? '' : String(column.default),
    options: [...(column.options ?? [])],
  };
}

export interface ColumnAlter {
  name: string;
  type?: ColumnType;
  required?: boolean;
  unique?: boolean;
  default?: unknown;
  options?: string[];
}

/** What an edit changes: a rename, and an alteration naming the column as it is called once
 *  renamed (one PATCH applies its renames before its alterations, all in one transaction). */
export function columnChange(column: Column, edit: ColumnEdit): { rename?: [string, string]; alter?: ColumnAlter } {
  const out: { rename?: [string, string]; alter?: ColumnAlter } = {};
  const newName = edit.name.trim();
  if (newName && newName !== column.name) out.rename = [column.name, newName];
  const alter: ColumnAlter = { name: newName || column.name };
  if (edit.type !== column.type) alter.type = edit.type;
  if (edit.required !== Boolean(column.required)) alter.required = edit.required;
  if (edit.unique !== Boolean(column.unique)) alter.unique = edit.unique;
  const before = column.default === undefined || column.default === null ? '' : String(column.default);
  if (edit.default !== before) alter.default = edit.default === '' ? null : edit.default;
  if (edit.type === 'select' && JSON.stringify(edit.options) !== JSON.stringify(column.options ?? [])) alter.options = [...edit.options];
  if (Object.keys(alter).length > 1) out.alter = alter;
  return out;
}

/** The change in words, for the confirmation. */
export function describeColumnChange(table: string, column: Column, edit: ColumnEdit): string[] {
  const change = columnChange(column, edit);
  const lines: string[] = [];
  if (change.rename) {
    lines.push(`Rename column "${change.rename[0]}" of "${table}" to "${change.rename[1]}": the data stays; row policies, redaction, indexes and the display column follow.`);
  }
  const a = change.alter;
  if (a) {
    const name = a.name;
    if (a.type) lines.push(`Change "${name}" from ${column.type} to ${a.type}: every row is converted (the table is rewritten).`);
    if (a.required !== undefined) lines.push(a.required ? `Make "${name}" required.` : `Make "${name}" optional.`);
    if (a.unique !== undefined) lines.push(a.unique ? `Make "${name}" unique within each org.` : `"${name}" need no longer be unique.`);
    if (a.default !== undefined) lines.push(a.default === null ? `Remove the default of "${name}".` : `Default of "${name}": ${JSON.stringify(a.default)}.`);
    if (a.options) {
      const removed = (column.options ?? []).filter((o) => !a.options!.includes(o));
      const added = a.options.filter((o) => !(column.options ?? []).includes(o));
      lines.push(`Options of "${name}": ${a.options.join(', ') || 'none'}${added.length ? ` (added: ${added.join(', ')})` : ''}${removed.length ? ` (removed: ${removed.join(', ')})` : ''}.`);
    }
  }
  if (lines.length) lines.push('All or nothing: if any row cannot take it, nothing changes and the rows are listed.');
  return lines;
}

export function describeDisplayColumn(def: Pick<TableDef, 'name'>, next: string | null): string {
  return next ? `Name the rows of "${def.name}" by "${next}" (references and lists of rows show it).`
    : `Name the rows of "${def.name}" by no column (a summary of their values is shown).`;
}

/** The columns that may name rows: every column but references and JSON. */
export function displayCandidates(def: Pick<TableDef, 'columns'>): string[] {
  return def.columns.filter((c) => c.type !== 'reference' && c.type !== 'json').map((c) => c.name);
}

const TRUE_WORDS = ['true', '1', 'yes', 't', 'y'];
const FALSE_WORDS = ['false', '0', 'no', 'f', 'n'];
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function asInteger(text: string): string | null {
  if (!/^\s*[+-]?\d+\s*$/.test(text)) return 'expected an integer';
  const n = BigInt(text.trim());
  return n < INT64_MIN || n > INT64_MAX ? 'integer out of 64-bit range' : null;
}

/** A real calendar day written YYYY-MM-DD (not 2026-02-30). */
function isDay(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  const time = Date.parse(`${text}T00:00:00Z`);
  return !Number.isNaN(time) && new Date(time).toISOString().slice(0, 10) === text;
}

/** Why `value` (as the row holds it) cannot become the edited column's type or options; null if it can. */
export function conversionProblem(value: unknown, from: ColumnType, edit: Pick<ColumnEdit, 'type' | 'options'>): string | null {
  if (value === null || value === undefined) return null;
  const text = typeof value === 'string' ? value : String(value);
  const to = edit.type;
  if (to === 'select') return edit.options.includes(text) ? null : `"${text}" is not one of the options`;
  if (to === from || to === 'text') return null;
  switch (to) {
    case 'integer': {
      if (from === 'numeric') {
        const m = /^([+-]?\d+)(?:\.(\d*))?$/.exec(text.trim());
        if (!m || /[1-9]/.test(m[2] ?? '')) return 'not a whole number';
        return asInteger(m[1]) ? 'not a whole number in 64-bit range' : null;
      }
      return asInteger(text);
    }
    case 'numeric':
      return /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(text) ? null : 'expected a decimal number';
    case 'boolean': {
      const low = text.trim().toLowerCase();
      return TRUE_WORDS.includes(low) || FALSE_WORDS.includes(low) ? null : 'expected a boolean (true/false/1/0/yes/no)';
    }
    case 'date':
      if (from === 'timestamp') return null;
      return isDay(text.trim()) ? null : 'expected a date YYYY-MM-DD';
    case 'timestamp':
      if (from === 'date') return null;
      if (Number.isNaN(Date.parse(text.trim()))) return 'expected an RFC 3339 timestamp';
      return /(Z|[+-]\d{2}:?\d{2})$/i.test(text.trim()) ? null : 'timestamp needs a UTC offset, e.g. 2026-01-31T12:00:00Z';
    case 'uuid':
      return /^\s*[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\s*$/i.test(text) ? null : 'expected a UUID';
    default:
      return null;
  }
}

export interface Failure { uid: string; column: string; message: string; value?: unknown }

/** The rows (at most 100) that could not take the edit: values that do not convert, nulls in a
 *  column made required, rows of one org sharing a value in a column made unique. */
export function previewFailures(rows: readonly Row[], column: Column, edit: ColumnEdit): Failure[] {
  const field = fieldOf(column);
  const shown = edit.name.trim() || column.name;
  const out: Failure[] = [];
  const push = (row: Row, message: string) => {
    if (out.length < MAX_LISTED) out.push({ uid: row.uid, column: shown, message, value: row[field] });
  };
  if (edit.required && !column.required) {
    for (const row of rows) if (row[field] === null || row[field] === undefined) push(row, 'required, but null');
  }
  if (edit.type !== column.type || (edit.type === 'select' && JSON.stringify(edit.options) !== JSON.stringify(column.options ?? []))) {
    for (const row of rows) {
      const problem = conversionProblem(row[field], column.type, edit);
      if (problem) push(row, `cannot be converted: ${problem}`);
    }
  }
  if (edit.unique && !column.unique) {
    const groups = new Map<string, Row[]>();
    for (const row of rows) {
      const value = row[field];
      if (value === null || value === undefined) continue;
      const key = JSON.stringify([row.org ?? '', value]);
      groups.set(key, [...(groups.get(key) ?? []), row]);
    }
    for (const group of groups.values()) {
      if (group.length > 1) for (const row of group) push(row, 'another row of its org has the same value');
    }
  }
  return out;
}

/** The PATCH body of one column edit (and a display column change, when given). */
export function patchBody(column: Column, edit: ColumnEdit): { renameColumns?: Record<string, string>; alterColumns?: ColumnAlter[] } {
  const change = columnChange(column, edit);
  return {
    ...(change.rename ? { renameColumns: { [change.rename[0]]: change.rename[1] } } : {}),
    ...(change.alter ? { alterColumns: [change.alter] } : {}),
  };
}
