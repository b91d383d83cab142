import { describe, expect, it } from 'vitest';
import { actionKind, actorOf, type AuditEntry, detailLines, matchesAudit, targetLabel } from './audit';

const names = {
  orgs: new Map([['o1', 'North']]),
  users: new Map([['u1', 'ada@north.test']]),
};
const entry = (action: string, target: string, details: unknown = {}, extra: Partial<AuditEntry> = {}): AuditEntry =>
  ({ id: 1, at: '2026-01-01T00:00:00Z', action, target, details, ...extra });

describe('the audit log in words', () => {
  it('names the actor: the admin token unless the entry records someone', () => {
    expect(actorOf(entry('table.create', 'tables/t'))).toBe('admin token');
    expect(actorOf(entry('table.create', 'tables/t', {}, { actor: 'ops@acme' }))).toBe('ops@acme');
  });

  it('names a member or a key acting on their org, and the operator by the admin token', () => {
    const by = (actor: unknown) => actorOf(entry('member.put', 'orgs/o1/members/u2', {}, { actor }), names);
    expect(by({ kind: 'member', user: 'u1', org: 'o1' })).toBe('member ada@north.test in North');
    expect(by({ kind: 'key', key: 'k1', org: 'o1' })).toBe('API key k1 in North');
    expect(by({ kind: 'operator' })).toBe('admin token');
    expect(targetLabel('orgs/o1/keys/0123456789ab', names)).toBe('API key 01234567… of North');
    expect(targetLabel('orgs/o1/invitations/0123456789ab', names)).toBe('invitation 01234567… to North');
  });

  it('names targets by org name and user email instead of uids', () => {
    expect(targetLabel('orgs/o1/members/u1', names)).toBe('member ada@north.test in North');
    expect(targetLabel('orgs/o1', names)).toBe('org North');
    expect(targetLabel('users/u9', names)).toBe('user u9');
    expect(targetLabel('tables/invoices/rows/r1', names)).toBe('row r1 of invoices');
    expect(targetLabel('tables/invoices/indexes/by_vendor', names)).toBe('index by_vendor of invoices');
    expect(targetLabel('acme', names)).toBe('app acme');
  });

  it('turns details into short lines: lists joined, columns by name, uids named', () => {
    const lines = detailLines({
      name: 'invoices',
      columns: [{ name: 'number', type: 'text' }, { name: 'amount', type: 'numeric' }],
      operations: { list: true, delete: false },
      org: 'o1',
      roles: [],
    }, names);
    expect(lines).toEqual([
      ['name', 'invoices'], ['columns', 'number, amount'], ['operations', 'list: true; delete: false'],
      ['org', 'North'], ['roles', 'none'],
    ]);
    expect(detailLines(null, names)).toEqual([]);
  });

  it('filters by the kind of action and by words anywhere in the entry', () => {
    const put = entry('member.put', 'orgs/o1/members/u1', { roles: ['clerk'] });
    expect(actionKind('member.put')).toBe('member');
    expect(matchesAudit(put, { kind: 'member', text: '' }, names)).toBe(true);
    expect(matchesAudit(put, { kind: 'table', text: '' }, names)).toBe(false);
    expect(matchesAudit(put, { kind: '', text: 'ADA clerk' }, names)).toBe(true);
    expect(matchesAudit(put, { kind: '', text: 'viewer' }, names)).toBe(false);
  });

  it("says an impersonation's user once: in the target, not again in its details", () => {
    const details = { user: 'u1', org: 'o1', email: 'ada@north.test', ttl: 600 };
    expect(targetLabel('users/u1', names)).toBe('user ada@north.test');
    expect(detailLines(details, names, 'users/u1')).toEqual([['org', 'North'], ['ttl', '600']]);
    // Without the target (or with another one) nothing is left out.
    expect(detailLines(details, names).map(([k]) => k)).toEqual(['user', 'org', 'email', 'ttl']);
    expect(detailLines(details, names, 'users/u2').map(([k]) => k)).toEqual(['user', 'org', 'email', 'ttl']);
  });
});
