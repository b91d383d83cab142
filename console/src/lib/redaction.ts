// Which columns a member sees as "[redacted]" in a table, worked out from their roles as the
// server decides it (policy/decision.py `_redacted`): a column is hidden when every role of
// the member that grants `read` on the table redacts it, and every column is hidden when
// none does. View-as uses it to offer only the columns the member may order by (the server
// refuses an order by a redacted column).
import { grantOf } from './permissions';
import type { Column, Role } from './types';
import { fieldOf } from './types';

export function redactedColumns(table: string, columns: readonly Column[], held: readonly string[],
                                roles: readonly (Role & { name: string })[]): Set<string> {
  const readers = roles.filter((r) => held.includes(r.name) && grantOf(r.permissions, table, 'read') !== null);
  let hidden = new Set(columns.map((c) => c.name));
  for (const role of readers) {
    const redacts = new Set(role.redact?.[table] ?? []);
    hidden = new Set([...hidden].filter((c) => redacts.has(c)));
  }
  return hidden;
}

/** The fields (as rows name them: a reference's `_uid`) of the redacted columns. */
export function redactedFields(columns: readonly Column[], redacted: ReadonlySet<string>): Set<string> {
  return new Set(columns.filter((c) => redacted.has(c.name)).map(fieldOf));
}
