import { describe, expect, it } from 'vitest';
import { applyEvent, cellValue, changedFields, compareRows, insertionIndex, parseOrder, toCsv } from './rows';

describe('the grid row helpers', () => {
  it('send what an edited cell holds as the JSON the column takes', () => {
    expect(cellValue({ name: 'n', type: 'integer' }, '42')).toBe(42);
    expect(cellValue({ name: 'n', type: 'integer' }, 'forty')).toBe('forty');
    expect(cellValue({ name: 'a', type: 'numeric' }, '8760.00')).toBe('8760.00');
    expect(cellValue({ name: 'j', type: 'json' }, '{"a":1}')).toEqual({ a: 1 });
    expect(cellValue({ name: 't', type: 'text' }, '')).toBeNull();
  });

  it('put an inserted row where the order puts it, replace an updated one, and drop a deleted one', () => {
    const rows = [{ uid: 'a', n: 1 }, { uid: 'b', n: 2 }];
    expect(applyEvent(rows, { id: '1', op: 'insert', table: 't', row: { uid: 'c' } }).rows.map((r) => r.uid)).toEqual(['a', 'b', 'c']);
    const between = applyEvent(rows, { id: '1', op: 'insert', table: 't', row: { uid: 'z', n: 1.5 } }, parseOrder('n'));
    expect(between.rows.map((r) => r.uid)).toEqual(['a', 'z', 'b']);
    expect(between.flash === 'insert' && between.index).toBe(1);
    const newest = applyEvent(rows, { id: '1', op: 'insert', table: 't', row: { uid: 'z', n: 9 } }, parseOrder('-n'));
    expect(newest.rows.map((r) => r.uid)).toEqual(['z', 'a', 'b']);
    const updated = applyEvent(rows, { id: '1', op: 'update', table: 't', row: { uid: 'b', n: 5 } });
    expect(updated.flash).toBe('update');
    expect(updated.rows[1].n).toBe(5);
    expect(applyEvent(rows, { id: '1', op: 'delete', table: 't', rowUid: 'a' }).rows).toEqual([{ uid: 'b', n: 2 }]);
    expect(applyEvent(rows, { id: '1', op: 'delete', table: 't', rowUid: 'zz' }).flash).toBeNull();
  });

  it('order rows as the API does: numbers as numbers, nulls last either way, then uid', () => {
    const asc = parseOrder('amount');
    const desc = parseOrder('-amount');
    expect(compareRows({ uid: 'a', amount: '9.50' }, { uid: 'b', amount: '10.00' }, asc)).toBeLessThan(0);
    expect(compareRows({ uid: 'a', amount: null }, { uid: 'b', amount: '1' }, asc)).toBeGreaterThan(0);
    expect(compareRows({ uid: 'a', amount: null }, { uid: 'b', amount: '1' }, desc)).toBeGreaterThan(0);
    expect(compareRows({ uid: 'a', amount: '1' }, { uid: 'b', amount: '1' }, desc)).toBeGreaterThan(0);
    expect(compareRows({ uid: 'a', s: 'B' }, { uid: 'b', s: 'a' }, parseOrder('s'))).toBeLessThan(0);
  });

  it('leave a new row out of a page it does not belong to', () => {
    const rows = [{ uid: 'b', n: 2 }, { uid: 'c', n: 3 }];
    const order = parseOrder('n');
    expect(insertionIndex(rows, { uid: 'x', n: 9 }, order, { firstPage: true, lastPage: false })).toBeNull();
    expect(insertionIndex(rows, { uid: 'x', n: 9 }, order, { firstPage: true, lastPage: true })).toBe(2);
    expect(insertionIndex(rows, { uid: 'x', n: 1 }, order, { firstPage: false, lastPage: true })).toBeNull();
    expect(insertionIndex(rows, { uid: 'x', n: 1 }, order, { firstPage: true, lastPage: true })).toBe(0);
    expect(insertionIndex([], { uid: 'x', n: 1 }, order, { firstPage: false, lastPage: false })).toBe(0);
    expect(applyEvent(rows, { id: '1', op: 'insert', table: 't', row: { uid: 'x', n: 9 } }, order,
      { firstPage: true, lastPage: false })).toEqual({ rows, flash: null });
  });

  it('name the fields another writer changed', () => {
    expect(changedFields({ uid: 'a', s: 'x', updatedAt: '1' }, { uid: 'a', s: 'y', updatedAt: '2' })).toEqual(['s']);
  });

  it('quote CSV fields that hold commas, quotes or line breaks', () => {
    expect(toCsv(['a', 'b'], [{ uid: '1', a: 'x,y', b: 'say "hi"' }, { uid: '2', a: null, b: 3 }]))
      .toBe('a,b\r\n"x,y","say ""hi"""\r\n,3\r\n');
  });
});
