import { describe, expect, it } from 'vitest';
import { redactedColumns, redactedFields } from './redaction';
import type { Column } from './types';

const columns: Column[] = [
  { name: 'number', type: 'text' }, { name: 'amount', type: 'numeric' },
  { name: 'vendor', type: 'reference', references: 'vendors' },
];
const clerk = { name: 'clerk', permissions: ['invoices:read', 'invoices:read_list'], rowPolicies: {}, redact: { invoices: ['amount', 'vendor'] }, grants: [] };
const auditor = { name: 'auditor', permissions: ['invoices:*'], rowPolicies: {}, redact: { invoices: ['vendor'] }, grants: [] };
const writer = { name: 'writer', permissions: ['invoices:create'], rowPolicies: {}, redact: {}, grants: [] };

describe('the columns a member sees redacted', () => {
  it('are those every role of the member that reads the table redacts', () => {
    expect(redactedColumns('invoices', columns, ['clerk'], [clerk, auditor])).toEqual(new Set(['amount', 'vendor']));
    expect(redactedColumns('invoices', columns, ['clerk', 'auditor'], [clerk, auditor])).toEqual(new Set(['vendor']));
  });

  it('ignore roles the member does not hold or that do not read the table', () => {
    expect(redactedColumns('invoices', columns, ['clerk', 'writer'], [clerk, auditor, writer])).toEqual(new Set(['amount', 'vendor']));
  });

  it('are every column for a member no role lets read the table', () => {
    expect(redactedColumns('invoices', columns, ['writer'], [clerk, writer])).toEqual(new Set(['number', 'amount', 'vendor']));
  });

  it('are named as rows name them: a reference by its _uid field', () => {
    expect(redactedFields(columns, new Set(['vendor', 'amount']))).toEqual(new Set(['amount', 'vendor_uid']));
  });
});
