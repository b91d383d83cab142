import { describe, expect, it } from 'vitest';
import { displayColumnOf, firstOf, rowLabel } from './display';
import type { Column } from './types';

const columns: Column[] = [
  { name: 'number', type: 'text', required: true, unique: true },
  { name: 'vendor', type: 'reference', references: 'vendors' },
  { name: 'status', type: 'text' },
  { name: 'amount', type: 'numeric' },
];

describe('naming a row to people', () => {
  it('takes the server display column, and the contract default when the definition has none', () => {
    expect(displayColumnOf({ columns, displayColumn: 'status' })).toBe('status');
    expect(displayColumnOf({ columns, displayColumn: null })).toBeNull();
    expect(displayColumnOf({ columns })).toBe('number');
    expect(displayColumnOf({ columns: columns.slice(1) })).toBeNull();
  });

  it('names a row by its display column', () => {
    expect(rowLabel({ uid: 'u1', number: 'INV-7', status: 'paid' }, { columns })).toBe('INV-7');
  });

  it('summarizes a row without a display column by its first non-empty values', () => {
    const def = { columns, displayColumn: null };
    expect(rowLabel({ uid: 'u1', number: 'INV-7', vendor_uid: null, status: 'paid', amount: '3.00' }, def))
      .toBe('number: INV-7 · status: paid · amount: 3.00');
    expect(rowLabel({ uid: 'u1' }, def)).toBe('u1');
    expect(rowLabel({ uid: 'u1', number: 'x'.repeat(200) }, { columns }).length).toBe(80);
  });

  it('lists at most the first few and counts the rest', () => {
    expect(firstOf(['a', 'b', 'c'], 2)).toEqual({ listed: ['a', 'b'], more: 1 });
    expect(firstOf(['a'], 5)).toEqual({ listed: ['a'], more: 0 });
  });
});
