// The shapes of the contract's resources, as the console reads them.

export const COLUMN_TYPES = [
  'text', 'integer', 'numeric', 'boolean', 'timestamp', 'date', 'uuid', 'json', 'reference', 'select',
] as const;
export type ColumnType = (typeof COLUMN_TYPES)[number];

export interface Column {
  name: string;
  type: ColumnType;
  required?: boolean;
  unique?: boolean;
  default?: unknown;
  references?: string;
  /** A `select` column's allowed values. */
  options?: string[];
}

export const OPERATIONS = ['list', 'read', 'create', 'update', 'delete'] as const;
export type Operation = (typeof OPERATIONS)[number];

export interface TableDef {
  name: string;
  columns: Column[];
  operations: Record<Operation, boolean>;
  softDelete: boolean;
  /** The column that names a row to people; null: none; absent: a server without the field. */
  displayColumn?: string | null;
  indexes?: Index[];
}

export type IndexState = 'building' | 'ready' | 'failed';

export interface Index {
  name: string;
  columns: string[];
  unique: boolean;
  kind: 'btree' | 'search';
  state: IndexState;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

export interface AppSettings {
  accessTokenTtl: number;
  refreshTokenTtl: number;
  allowedOrigins?: string[];
  [key: string]: unknown;
}

export interface App {
  uid: string;
  name: string;
  createdAt: string;
  settings: AppSettings;
}

export interface Org { uid: string; name: string }
export interface User { uid: string; email: string }
export interface Member { org: string; user: string; roles: string[]; email?: string }
export interface Membership { org: string; orgName: string; roles: string[] }

export interface Role {
  name: string;
  permissions: string[];
  rowPolicies: Record<string, unknown>;
  redact: Record<string, string[]>;
}

export type Row = Record<string, unknown> & { uid: string };

export interface Page<T> { items: T[]; next?: string | null }

/** The field a column takes in a row: a reference `vendor` travels as `vendor_uid`. */
export function fieldOf(column: Column): string {
  return column.type === 'reference' ? `${column.name}_uid` : column.name;
}
