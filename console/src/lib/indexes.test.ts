import { describe, expect, it } from 'vitest';
import { anyBuilding, columnUniques, describeIndex, describeNewIndex, failedRows, indexableColumns, indexSpec } from './indexes';
import type { Column } from './types';

const columns: Column[] = [
  { name: 'number', type: 'text' },
  { name: 'vendor', type: 'reference', references: 'vendors' },
  { name: 'amount', type: 'numeric' },
  { name: 'status', type: 'select', options: ['a'] },
];
const draft = (columns: string, extra: object = {}) => ({ name: 'ix', columns, unique: false, kind: 'btree' as const, ...extra });

describe('an index as the console edits it', () => {
  it('names reference columns without _uid and the platform fields', () => {
    expect(indexableColumns({ columns })).toEqual(['number', 'vendor', 'amount', 'status', 'uid', 'createdAt', 'updatedAt']);
  });

  it('sends the columns as typed, descending ones with a minus', () => {
    expect(indexSpec({ columns }, draft('vendor, -createdAt', { unique: true })))
      .toEqual({ spec: { columns: ['vendor', '-createdAt'], unique: true, kind: 'btree' } });
  });

  it('refuses what the server would refuse, saying why', () => {
    expect(indexSpec({ columns }, draft('nope'))).toEqual({ error: '"nope" is not a column of this table.' });
    expect(indexSpec({ columns }, draft('vendor_uid'))).toEqual({ error: '"vendor_uid" is not a column of this table.' });
    expect(indexSpec({ columns }, draft('amount, -amount'))).toEqual({ error: 'Name each column once.' });
    expect(indexSpec({ columns }, draft(''))).toEqual({ error: 'Name at least one column.' });
    expect(indexSpec({ columns }, { ...draft('amount'), name: 'Bad Name' })).toHaveProperty('error');
    expect(indexSpec({ columns }, draft('a,b,c,d,e,f,g,h,i'))).toEqual({ error: 'An index holds at most 8 columns.' });
    expect(indexSpec({ columns }, draft('amount', { kind: 'search' }))).toHaveProperty('error');
    expect(indexSpec({ columns }, draft('number', { kind: 'search', unique: true }))).toHaveProperty('error');
    expect(indexSpec({ columns }, draft('number, status', { kind: 'search' })))
      .toEqual({ spec: { columns: ['number', 'status'], unique: false, kind: 'search' } });
  });

  it('describes an index and what adding it does', () => {
    expect(describeIndex({ columns: ['vendor', '-createdAt'], unique: true, kind: 'btree' })).toBe('unique on vendor ↑, createdAt ↓');
    expect(describeIndex({ columns: ['number'], unique: false, kind: 'search' })).toBe('full-text search over number');
    expect(describeNewIndex('invoices', 'ix', { columns: ['amount'], unique: false, kind: 'btree' })[0])
      .toBe('Add index "ix" to "invoices": on amount ↑.');
  });

  it('follows the build state and lists the rows a failed unique build names', () => {
    expect(anyBuilding([{ state: 'ready' }, { state: 'building' }])).toBe(true);
    expect(anyBuilding([{ state: 'failed' }])).toBe(false);
    expect(failedRows({ error: { code: 'CONFLICT', message: 'm', details: { rows: [{ uid: 'a', column: 'x', message: '' }] } } })).toEqual(['a']);
    expect(failedRows({})).toEqual([]);
  });

  it("lists the unique indexes a table's columns carry, which the indexes route does not", () => {
    const def = { columns: [{ name: 'number', type: 'text', unique: true }, { name: 'note', type: 'text' }] as Column[] };
    expect(columnUniques(def)).toEqual([{ column: 'number', text: "unique on number ↑ (the column's own setting)" }]);
    expect(columnUniques({ columns: [{ name: 'note', type: 'text' }] as Column[] })).toEqual([]);
  });
});
