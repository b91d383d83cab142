import { describe, expect, it } from 'vitest';
import { type LabelCache, linkedRow, missingReferences, remember, rowLink } from './references';
import type { Column } from './types';

const columns: Column[] = [
  { name: 'number', type: 'text' },
  { name: 'vendor', type: 'reference', references: 'vendors' },
  { name: 'buyer', type: 'reference', references: 'people' },
];

describe('reference cells named by the referenced row', () => {
  it('asks once per referenced table for the uids not known yet', () => {
    const cache: LabelCache = new Map([['vendors', new Map([['v1', 'Acme']])]]);
    const rows = [
      { uid: 'r1', vendor_uid: 'v1', buyer_uid: 'p1' },
      { uid: 'r2', vendor_uid: 'v2', buyer_uid: 'p1' },
      { uid: 'r3', vendor_uid: null, buyer_uid: null },
    ];
    expect(missingReferences(columns, rows, cache)).toEqual(new Map([['vendors', ['v2']], ['people', ['p1']]]));
  });

  it('remembers rows read and rows that could not be read, so neither is asked again', () => {
    const cache: LabelCache = new Map();
    remember(cache, 'vendors', ['v1', 'v2'], new Map([['v1', 'Acme']]));
    expect(cache.get('vendors')).toEqual(new Map([['v1', 'Acme'], ['v2', null]]));
    expect(missingReferences(columns, [{ uid: 'r', vendor_uid: 'v2' }], cache)).toEqual(new Map());
  });

  it('links to one row of a table and reads the link back', () => {
    const link = rowLink('shop', 'vendors', 'v 1');
    expect(link).toBe('#/apps/shop/data/vendors?row=v%201');
    expect(linkedRow(link.split('?')[1])).toBe('v 1');
    expect(linkedRow(undefined)).toBeNull();
  });
});
