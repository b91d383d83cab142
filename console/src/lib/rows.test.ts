import { describe, expect, it } from 'vitest';
import { applyEvent, cellValue, changedFields, toCsv } from './rows';

describe('the grid row helpers', () => {
  it('send what an edited cell holds as the JSON the column takes', () => {
    expect(cellValue({ name: 'n', type: 'integer' }, '42')).toBe(42);
    expect(cellValue({ name: 'n', type: 'integer' }, 'forty')).toBe('forty');
    expect(cellValue({ name: 'a', type: 'numeric' }, '8760.00')).toBe('8760.00');
    expect(cellValue({ name: 'j', type: 'json' }, '{"a":1}')).toEqual({ a: 1 });
    expect(cellValue({ name: 't', type: 'text' }, '')).toBeNull();
  });

  it('put an inserted row first, replace an updated one, and drop a deleted one', () => {
    const rows = [{ uid: 'a', n: 1 }, { uid: 'b', n: 2 }];
    expect(applyEvent(rows, { op: 'insert', table: 't', row: { uid: 'c' } }).rows.map((r) => r.uid)).toEqual(['c', 'a', 'b']);
    const updated = applyEvent(rows, { op: 'update', table: 't', row: { uid: 'b', n: 5 } });
    expect(updated.flash).toBe('update');
    expect(updated.rows[1].n).toBe(5);
    expect(applyEvent(rows, { op: 'delete', table: 't', rowUid: 'a' }).rows).toEqual([{ uid: 'b', n: 2 }]);
    expect(applyEvent(rows, { op: 'delete', table: 't', rowUid: 'zz' }).flash).toBeNull();
  });

  it('name the fields another writer changed', () => {
    expect(changedFields({ uid: 'a', s: 'x', updatedAt: '1' }, { uid: 'a', s: 'y', updatedAt: '2' })).toEqual(['s']);
  });

  it('quote CSV fields that hold commas, quotes or line breaks', () => {
    expect(toCsv(['a', 'b'], [{ uid: '1', a: 'x,y', b: 'say "hi"' }, { uid: '2', a: null, b: 3 }]))
      .toBe('a,b\r\n"x,y","say ""hi"""\r\n,3\r\n');
  });
});
