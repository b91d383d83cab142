// The permissions matrix: a role's permission strings as roles × tables × actions, with
// wildcards (`t:*`, `*:*`, `*:action`) shown as what they grant, and edits back to strings.

export const ACTIONS = ['read_list', 'read', 'create', 'update', 'delete'] as const;
export type Action = (typeof ACTIONS)[number];
/** An org's own resources a permission may name beside tables (section 3a). */
export const ORG_RESOURCES = ['org.members', 'org.keys'] as const;

/** How a cell is granted: by its own string, by a wildcard, or not at all. */
export type Grant = 'explicit' | 'wildcard' | null;

export function grantOf(permissions: readonly string[], table: string, action: Action): Grant {
  if (permissions.includes(`${table}:${action}`)) return 'explicit';
  if (permissions.includes(`${table}:*`) || permissions.includes('*:*') ||
      permissions.includes(`*:${action}`)) return 'wildcard';
  return null;
}

export type Matrix = Record<string, Record<Action, Grant>>;

/** Every table × action for one role's permissions. */
export function expand(permissions: readonly string[], tables: readonly string[]): Matrix {
  const matrix: Matrix = {};
  for (const table of tables) {
    matrix[table] = Object.fromEntries(ACTIONS.map((a) => [a, grantOf(permissions, table, a)])) as
      Record<Action, Grant>;
  }
  return matrix;
}

function explicitGrants(permissions: readonly string[], tables: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const table of tables) {
    for (const action of ACTIONS) {
      if (grantOf(permissions, table, action)) out.add(`${table}:${action}`);
    }
  }
  return out;
}

/**
 * Turns one cell on or off. Turning off a cell that a wildcard grants replaces that wildcard by
 * the explicit grants it stood for, less the one turned off, so nothing else changes.
 */
export function toggle(permissions: readonly string[], tables: readonly string[], table: string,
                       action: Action, on: boolean): string[] {
  const grant = grantOf(permissions, table, action);
  if (on) return grant ? [...permissions] : [...permissions, `${table}:${action}`];
  if (grant === null) return [...permissions];
  if (grant === 'explicit' && grantOf(permissions.filter((p) => p !== `${table}:${action}`),
                                      table, action) === null) {
    return permissions.filter((p) => p !== `${table}:${action}`);
  }
  const touched = (p: string) => p === '*:*' || p === `${table}:*` || p === `*:${action}` ||
    p === `${table}:${action}`;
  const kept = permissions.filter((p) => !touched(p));
  const expanded = [...explicitGrants(permissions.filter(touched), tables)]
    .filter((p) => p !== `${table}:${action}`);
  return compact([...kept, ...expanded], tables);
}

/** Writes a table's five actions as `t:*`, and drops duplicates. */
export function compact(permissions: readonly string[], tables: readonly string[]): string[] {
  const set = new Set(permissions);
  for (const table of tables) {
    if (ACTIONS.every((a) => set.has(`${table}:${a}`))) {
      for (const a of ACTIONS) set.delete(`${table}:${a}`);
      set.add(`${table}:*`);
    }
  }
  return [...set];
}
