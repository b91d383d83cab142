// The shapes of the contract's resources, as `@authoric/client/admin` types them, and the few
// console helpers on them. Which column types exist, and how they convert, the console reads
// from the server (lib/columnTypes: GET /admin/column-types).
import type { ColumnDef, TableDef as LibTableDef } from '@authoric/client/admin';

export type {
  AppInfo as App, AppSettings, AuditEntry, ColumnType, IndexDef as Index, Member, Membership, Org, Preview, Role, User,
  Webhook, WebhookDelivery,
} from '@authoric/client/admin';

/** A column as the console edits it: one the server answered (`ColumnDef`, every attribute set)
 * or one being written, whose attributes stay left out until set (as `NewColumn` sends them). */
export type Column = Pick<ColumnDef, 'name' | 'type'> & Partial<Omit<ColumnDef, 'name' | 'type'>>;

export const OPERATIONS = ['list', 'read', 'create', 'update', 'delete'] as const;
export type Operation = (typeof OPERATIONS)[number];

/** A table definition, its columns as the console edits them; the console also reads one from a
 * server that predates a field. */
export type TableDef = Omit<LibTableDef, 'columns' | 'displayColumn' | 'captureSqlWrites' | 'sqlName'> &
  Partial<Pick<LibTableDef, 'displayColumn' | 'captureSqlWrites' | 'sqlName'>> & { columns: Column[] };

export type IndexState = 'building' | 'ready' | 'failed';

export type Row = Record<string, unknown> & { uid: string };

export interface Page<T> { items: T[]; next?: string | null; total?: number }

/** The field a column takes in a row: a reference `vendor` travels as `vendor_uid`. */
export function fieldOf(column: Column): string {
  return column.type === 'reference' ? `${column.name}_uid` : column.name;
}
