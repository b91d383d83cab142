// The audit log made readable (contract section 2a, `GET .../audit`): who acted, what the
// target is in names rather than uids, the details as short lines, and the page's filters.

export interface AuditEntry {
  id: string | number;
  at: string;
  action: string;
  target: unknown;
  details: unknown;
  /** Who acted (section 3a): `{kind: "operator"}`, `{kind: "member", user, org}` or
   *  `{kind: "key", ...}`; a string from older servers. */
  actor?: unknown;
}

/** The actor kinds the audit route filters by (`?actor=`). */
export const ACTOR_KINDS = ['operator', 'member', 'key'] as const;

/** Names for the uids an entry holds: orgs and users of the app. */
export interface Names {
  orgs: ReadonlyMap<string, string>;
  users: ReadonlyMap<string, string>;
}

const NO_NAMES: Names = { orgs: new Map(), users: new Map() };

/** Who made the change: the operator (the platform's admin token; an impersonation acts for
 *  the operator too), a member of an org (section 3a), or an org's API key. */
export function actorOf(entry: AuditEntry, names: Names = NO_NAMES): string {
  const recorded = (entry.details as { actor?: unknown } | null)?.actor ?? entry.actor;
  if (typeof recorded === 'string' && recorded) return recorded;
  const actor = (recorded ?? entry.actor) as { kind?: string; user?: string; org?: string; key?: string } | null;
  if (actor?.kind === 'member' && actor.user) {
    return `member ${USER(names, actor.user)}${actor.org ? ` in ${ORG(names, actor.org)}` : ''}`;
  }
  if (actor?.kind === 'key') return `API key ${actor.key ?? ''}${actor.org ? ` in ${ORG(names, actor.org)}` : ''}`.trim();
  return 'admin token';
}

/** The kind of an action: `table` for `table.update`, `impersonate` for itself. */
export function actionKind(action: string): string {
  return action.split('.')[0];
}

const ORG = (names: Names, uid: string) => names.orgs.get(uid) ?? uid;
const USER = (names: Names, uid: string) => names.users.get(uid) ?? uid;

/** The target in words: `member ada@x.io in North`, `org North`, `row 0190… of invoices`. */
export function targetLabel(target: unknown, names: Names): string {
  if (typeof target !== 'string') return target === null || target === undefined ? '' : JSON.stringify(target);
  let m = /^orgs\/([^/]+)\/members\/([^/]+)$/.exec(target);
  if (m) return `member ${USER(names, m[2])} in ${ORG(names, m[1])}`;
  if ((m = /^orgs\/([^/]+)\/invitations\/([^/]+)$/.exec(target))) return `invitation ${m[2].slice(0, 8)}… to ${ORG(names, m[1])}`;
  if ((m = /^orgs\/([^/]+)\/keys\/([^/]+)$/.exec(target))) return `API key ${m[2].slice(0, 8)}… of ${ORG(names, m[1])}`;
  if ((m = /^orgs\/([^/]+)$/.exec(target))) return `org ${ORG(names, m[1])}`;
  if ((m = /^users\/([^/]+)$/.exec(target))) return `user ${USER(names, m[1])}`;
  if ((m = /^tables\/([^/]+)\/rows\/([^/]+)$/.exec(target))) return `row ${m[2]} of ${m[1]}`;
  if ((m = /^tables\/([^/]+)\/rows$/.exec(target))) return `rows of ${m[1]}`;
  if ((m = /^tables\/([^/]+)\/indexes\/([^/]+)$/.exec(target))) return `index ${m[2]} of ${m[1]}`;
  if ((m = /^tables\/([^/]+)$/.exec(target))) return `table ${m[1]}`;
  if ((m = /^roles\/([^/]+)$/.exec(target))) return `role ${m[1]}`;
  // The app itself is recorded by its bare name (`app.update`): say that it is the app.
  if (!target.includes('/')) return `app ${target}`;
  return target;
}

/** The keys of `details` that only repeat what the target already names: an impersonation's
 *  target is its user, so its `user` uid and `email` say nothing more. */
function repeatedKeys(target: unknown, details: Record<string, unknown>, names: Names): Set<string> {
  const m = typeof target === 'string' ? /^users\/([^/]+)$/.exec(target) : null;
  if (!m) return new Set();
  const user = m[1];
  const shown = USER(names, user);
  return new Set(Object.entries(details)
    .filter(([k, v]) => (k === 'user' && v === user) || (k === 'email' && v === shown))
    .map(([k]) => k));
}

function valueText(key: string, value: unknown, names: Names): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') {
    if (key === 'org') return ORG(names, value);
    if (key === 'user') return USER(names, value);
    return value;
  }
  if (typeof value !== 'object') return String(value);
  if (Array.isArray(value)) {
    if (!value.length) return 'none';
    return value.map((item) => (item && typeof item === 'object' && 'name' in item
      ? String((item as { name: unknown }).name) : valueText(key, item, names))).join(', ');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (!entries.length) return 'none';
  return entries.map(([k, v]) => `${k}: ${valueText(k, v, names)}`).join('; ');
}

/** The details as [key, text] lines, with org and user uids named, leaving out what the
 *  entry's `target` (when given) already says. */
export function detailLines(details: unknown, names: Names, target?: unknown): [string, string][] {
  if (details === null || details === undefined) return [];
  if (typeof details !== 'object' || Array.isArray(details)) return [['', valueText('', details, names)]];
  const record = details as Record<string, unknown>;
  const repeated = repeatedKeys(target, record, names);
  return Object.entries(record).filter(([k]) => !repeated.has(k)).map(([k, v]) => [k, valueText(k, v, names)]);
}

export interface AuditFilter {
  /** An action kind (`table`, `member`, `row`...), or '' for all. */
  kind: string;
  /** Words that the action, actor, target or details must contain (case-insensitive). */
  text: string;
}

export function matchesAudit(entry: AuditEntry, filter: AuditFilter, names: Names): boolean {
  if (filter.kind && actionKind(entry.action) !== filter.kind) return false;
  const words = filter.text.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return true;
  const haystack = [entry.action, actorOf(entry, names), String(entry.target ?? ''), targetLabel(entry.target, names),
    ...detailLines(entry.details, names).flat()].join(' ').toLowerCase();
  return words.every((w) => haystack.includes(w));
}
