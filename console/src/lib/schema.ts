// Says in words exactly what a schema change will do, for the confirmation shown before it.
import { type Column, OPERATIONS, type Operation, type TableDef } from './types';

export function describeColumn(column: Column): string {
  const kind = column.type === 'reference' ? ` → ${column.references}`
    : column.type === 'select' ? `: ${(column.options ?? []).join(' | ')}` : '';
  const parts = [`${column.name} (${column.type}${kind})`];
  if (column.required) parts.push('required');
  if (column.unique) parts.push('unique');
  if (column.default !== undefined && column.default !== null && column.default !== '') {
    parts.push(`default ${JSON.stringify(column.default)}`);
  }
  return parts.join(', ');
}

export function describeNewTable(def: Pick<TableDef, 'name' | 'columns' | 'operations' | 'softDelete'>): string[] {
  const off = OPERATIONS.filter((op) => !def.operations[op]);
  return [
    `Create table "${def.name}" (a new PostgreSQL table).`,
    ...def.columns.map((c) => `Add column ${describeColumn(c)}.`),
    off.length ? `Switch off: ${off.join(', ')}.` : 'All operations switched on.',
    def.softDelete ? 'Deletes are soft (rows are kept, hidden).' : 'Deletes remove rows.',
  ];
}

export interface TablePatch {
  operations?: Record<Operation, boolean>;
  addColumns?: Column[];
  dropColumns?: string[];
}

export function describePatch(table: TableDef, patch: TablePatch): string[] {
  const lines: string[] = [];
  for (const column of patch.addColumns ?? []) lines.push(`Add column ${describeColumn(column)} to "${table.name}".`);
  for (const name of patch.dropColumns ?? []) {
    lines.push(`Drop column "${name}" from "${table.name}": its values in every row are deleted.`);
  }
  if (patch.operations) {
    for (const op of OPERATIONS) {
      if (patch.operations[op] !== table.operations[op]) {
        lines.push(`Switch ${op} ${patch.operations[op] ? 'on' : 'off'} for "${table.name}".`);
      }
    }
  }
  return lines;
}

/** Only the operations that differ, so an unchanged switch is not sent. */
export function operationsChanged(table: TableDef, next: Record<Operation, boolean>): boolean {
  return OPERATIONS.some((op) => next[op] !== table.operations[op]);
}

/** A select column's options as typed: comma- or line-separated, trimmed, empties and repeats dropped. */
export function parseOptions(text: string): string[] {
  return [...new Set(text.split(/[,\n]/).map((o) => o.trim()).filter(Boolean))];
}
