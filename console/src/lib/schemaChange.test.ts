import { describe, expect, it } from 'vitest';
import {
  columnChange, conversionProblem, conversionsFrom, describeColumnChange, displayCandidates, editOf, patchBody,
  previewFailures,
} from './schemaChange';
import type { Column } from './types';

const status: Column = { name: 'status', type: 'text' };
const amount: Column = { name: 'amount', type: 'numeric' };

describe('renaming and retyping a column', () => {
  it("offers the conversions of the server's table, and only the column's own type before it is read", () => {
    const table = { conversions: { text: ['text', 'integer', 'select'], json: ['json'] } } as never;
    expect(conversionsFrom(table, 'text')).toEqual(['text', 'integer', 'select']);
    expect(conversionsFrom(table, 'json')).toEqual(['json']);
    expect(conversionsFrom(null, 'integer')).toEqual(['integer']);
  });

  it('sends only what changed, the alteration naming the renamed column', () => {
    expect(columnChange(status, editOf(status))).toEqual({});
    const edit = { ...editOf(status), name: 'state', type: 'select' as const, options: ['draft', 'paid'], required: true };
    expect(patchBody(status, edit)).toEqual({
      renameColumns: { status: 'state' },
      alterColumns: [{ name: 'state', type: 'select', required: true, options: ['draft', 'paid'] }],
    });
    expect(patchBody(status, { ...editOf(status), default: 'draft' })).toEqual({ alterColumns: [{ name: 'status', default: 'draft' }] });
    expect(patchBody({ ...status, default: 'x' }, { ...editOf(status), default: '' })).toEqual({ alterColumns: [{ name: 'status', default: null }] });
  });

  it('says in words what will happen', () => {
    const select: Column = { name: 'status', type: 'select', options: ['draft', 'paid'] };
    const lines = describeColumnChange('invoices', select, { ...editOf(select), name: 'state', options: ['draft', 'void'] });
    expect(lines[0]).toContain('Rename column "status" of "invoices" to "state"');
    expect(lines[1]).toBe('Options of "state": draft, void (added: void) (removed: paid).');
    expect(lines.at(-1)).toContain('All or nothing');
    expect(describeColumnChange('invoices', status, editOf(status))).toEqual([]);
  });

  it('checks values with the contract conversion rules', () => {
    const to = (type: Column['type'], options: string[] = []) => ({ type, options });
    expect(conversionProblem('42', 'text', to('integer'))).toBeNull();
    expect(conversionProblem(' -7 ', 'text', to('integer'))).toBeNull();
    expect(conversionProblem('4.5', 'text', to('integer'))).toBe('expected an integer');
    expect(conversionProblem('99999999999999999999', 'text', to('integer'))).toBe('integer out of 64-bit range');
    expect(conversionProblem('12.00', 'numeric', to('integer'))).toBeNull();
    expect(conversionProblem('12.50', 'numeric', to('integer'))).toBe('not a whole number');
    expect(conversionProblem('1e3', 'text', to('numeric'))).toBeNull();
    expect(conversionProblem('lots', 'text', to('numeric'))).toBe('expected a decimal number');
    expect(conversionProblem('Yes', 'text', to('boolean'))).toBeNull();
    expect(conversionProblem('maybe', 'text', to('boolean'))).not.toBeNull();
    expect(conversionProblem('2026-02-28', 'text', to('date'))).toBeNull();
    expect(conversionProblem('2026-02-30', 'text', to('date'))).toBe('expected a date YYYY-MM-DD');
    expect(conversionProblem('31/01/2026', 'text', to('date'))).toBe('expected a date YYYY-MM-DD');
    expect(conversionProblem('2026-01-31T12:00:00Z', 'text', to('timestamp'))).toBeNull();
    expect(conversionProblem('2026-01-31T12:00:00', 'text', to('timestamp'))).toContain('UTC offset');
    expect(conversionProblem('not-a-uuid', 'text', to('uuid'))).toBe('expected a UUID');
    expect(conversionProblem('paid', 'text', to('select', ['draft', 'paid']))).toBeNull();
    expect(conversionProblem('void', 'text', to('select', ['draft', 'paid']))).toBe('"void" is not one of the options');
    expect(conversionProblem(null, 'text', to('integer'))).toBeNull();
    expect(conversionProblem(true, 'boolean', to('text'))).toBeNull();
  });

  it('previews the rows that would fail: bad values, nulls made required, duplicates within an org', () => {
    const rows = [
      { uid: 'a', org: 'o1', amount: '10.00' },
      { uid: 'b', org: 'o1', amount: '10.50' },
      { uid: 'c', org: 'o1', amount: null },
      { uid: 'd', org: 'o2', amount: '10.00' },
      { uid: 'e', org: 'o1', amount: '10.00' },
    ];
    const edit = { ...editOf(amount), type: 'integer' as const, required: true, unique: true };
    expect(previewFailures(rows, amount, edit).map((f) => [f.uid, f.message])).toEqual([
      ['c', 'required, but null'],
      ['b', 'cannot be converted: not a whole number'],
      ['a', 'another row of its org has the same value'],
      ['e', 'another row of its org has the same value'],
    ]);
    expect(previewFailures(rows, amount, editOf(amount))).toEqual([]);
  });

  it('offers every column but references and JSON as the display column', () => {
    expect(displayCandidates({ columns: [status, amount, { name: 'v', type: 'reference', references: 'x' }, { name: 'j', type: 'json' }] }))
      .toEqual(['status', 'amount']);
  });
});
