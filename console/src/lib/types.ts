// The shapes of the contract's resources, as `@authoric/client/admin` types them, and the few
// console helpers on them. The column types come from the library's `ColumnType` (which
// mirrors the server's): the record below must name each of them, so a type the library adds
// or drops fails svelte-check until the console offers it.
import type { ColumnDef, ColumnType, TableDef as LibTableDef } from '@authoric/client/admin';

export type {
  AppInfo as App, AppSettings, AuditEntry, ColumnType, IndexDef as Index, Member, Membership, Org, Preview, Role, User,
  Webhook, WebhookDelivery,
} from '@authoric/client/admin';

const TYPES: Record<ColumnType, true> = {
  text: true, integer: true, numeric: true, boolean: true, timestamp: true, date: true, uuid: true, json: true,
  reference: true, select: true,
};
export const COLUMN_TYPES = Object.keys(TYPES) as ColumnType[];

export type Column = ColumnDef;

export const OPERATIONS = ['list', 'read', 'create', 'update', 'delete'] as const;
export type Operation = (typeof OPERATIONS)[number];

/** A table definition; the console also reads one from a server that predates a field. */
export type TableDef = Omit<LibTableDef, 'displayColumn' | 'captureSqlWrites' | 'sqlName'> &
  Partial<Pick<LibTableDef, 'displayColumn' | 'captureSqlWrites' | 'sqlName'>>;

export type IndexState = 'building' | 'ready' | 'failed';

export type Row = Record<string, unknown> & { uid: string };

export interface Page<T> { items: T[]; next?: string | null; total?: number }

/** The field a column takes in a row: a reference `vendor` travels as `vendor_uid`. */
export function fieldOf(column: Column): string {
  return column.type === 'reference' ? `${column.name}_uid` : column.name;
}
