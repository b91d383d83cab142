// The app's current memberships, replayed from its audit log: the contract lists orgs and
// users but has no route that lists memberships, and every membership change is audited.

export interface AuditEntry {
  id: string | number;
  at: string;
  action: string;
  target: unknown;
  details: unknown;
}

export interface Membership {
  org: string;
  user: string;
  roles: string[];
}

const MEMBER_TARGET = /^orgs\/([^/]+)\/members\/([^/]+)$/;

function idOf(target: unknown, kind: 'orgs' | 'users'): string | null {
  const match = typeof target === 'string' ? new RegExp(`^${kind}/([^/]+)$`).exec(target) : null;
  return match ? match[1] : null;
}

/** Memberships as they stand after `entries` (the audit log, newest first, as the API lists it). */
export function membershipsFromAudit(entries: readonly AuditEntry[]): Membership[] {
  const current = new Map<string, Membership>();
  for (const entry of [...entries].reverse()) {
    const member = typeof entry.target === 'string' ? MEMBER_TARGET.exec(entry.target) : null;
    if (entry.action === 'member.put' && member) {
      const details = (entry.details ?? {}) as { roles?: unknown };
      const roles = Array.isArray(details.roles) ? details.roles.map(String) : [];
      current.set(`${member[1]}:${member[2]}`, { org: member[1], user: member[2], roles });
    } else if (entry.action === 'member.delete' && member) {
      current.delete(`${member[1]}:${member[2]}`);
    } else if (entry.action === 'org.delete' || entry.action === 'user.delete') {
      const gone = idOf(entry.target, entry.action === 'org.delete' ? 'orgs' : 'users');
      for (const [key, m] of current) {
        if ((entry.action === 'org.delete' ? m.org : m.user) === gone) current.delete(key);
      }
    }
  }
  return [...current.values()];
}
