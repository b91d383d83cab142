import { describe, expect, it } from 'vitest';
import { type AuditEntry, membershipsFromAudit } from './members';

let id = 0;
const entry = (action: string, target: string, details: unknown = null): AuditEntry =>
  ({ id: ++id, at: '', action, target, details });

describe('memberships replayed from the audit log', () => {
  it('keeps the latest roles of each membership and forgets removed ones', () => {
    const newestFirst = [
      entry('member.delete', 'orgs/o2/members/u1'),
      entry('member.put', 'orgs/o1/members/u1', { roles: ['viewer'] }),
      entry('member.put', 'orgs/o2/members/u1', { roles: ['clerk'] }),
      entry('member.put', 'orgs/o1/members/u1', { roles: ['clerk'] }),
    ];
    expect(membershipsFromAudit(newestFirst)).toEqual([{ org: 'o1', user: 'u1', roles: ['viewer'] }]);
  });

  it('drops the memberships of a deleted user or org', () => {
    const newestFirst = [
      entry('org.delete', 'orgs/o2'),
      entry('user.delete', 'users/u2'),
      entry('member.put', 'orgs/o1/members/u2', { roles: ['a'] }),
      entry('member.put', 'orgs/o2/members/u1', { roles: ['b'] }),
      entry('member.put', 'orgs/o1/members/u1', { roles: ['c'] }),
    ];
    expect(membershipsFromAudit(newestFirst)).toEqual([{ org: 'o1', user: 'u1', roles: ['c'] }]);
  });

  it('ignores entries that are not about memberships', () => {
    expect(membershipsFromAudit([entry('table.create', 'tables/t'), entry('impersonate', 'users/u')])).toEqual([]);
  });
});
