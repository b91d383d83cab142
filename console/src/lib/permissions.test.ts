import { describe, expect, it } from 'vitest';
import { compact, expand, grantOf, toggle } from './permissions';

const TABLES = ['invoices', 'vendors'];

describe('the permissions matrix', () => {
  it('shows a table wildcard as all five actions of that table only', () => {
    const matrix = expand(['invoices:*'], TABLES);
    expect(Object.values(matrix.invoices)).toEqual(Array(5).fill('wildcard'));
    expect(Object.values(matrix.vendors)).toEqual(Array(5).fill(null));
  });

  it('shows *:* as every action on every table, and *:read on every table', () => {
    expect(Object.values(expand(['*:*'], TABLES)).flatMap(Object.values)).toEqual(Array(10).fill('wildcard'));
    const reads = expand(['*:read'], TABLES);
    expect(reads.vendors.read).toBe('wildcard');
    expect(reads.vendors.create).toBeNull();
  });

  it('tells an explicit grant from a wildcard one', () => {
    expect(grantOf(['vendors:read', 'vendors:*'], 'vendors', 'read')).toBe('explicit');
    expect(grantOf(['vendors:*'], 'vendors', 'delete')).toBe('wildcard');
  });

  it('turning off one action granted by a wildcard keeps the other four', () => {
    const after = toggle(['invoices:*', 'vendors:read'], TABLES, 'invoices', 'delete', false);
    expect(new Set(after)).toEqual(new Set(['vendors:read', 'invoices:read_list', 'invoices:read',
      'invoices:create', 'invoices:update']));
  });

  it('turning off one cell under *:* keeps every other table and action', () => {
    const after = toggle(['*:*'], TABLES, 'vendors', 'create', false);
    expect(grantOf(after, 'vendors', 'create')).toBeNull();
    expect(Object.values(expand(after, TABLES).invoices).every(Boolean)).toBe(true);
    expect(grantOf(after, 'vendors', 'read')).not.toBeNull();
  });

  it('turning on an action adds just that string, and five of them compact to a wildcard', () => {
    expect(toggle([], TABLES, 'vendors', 'read', true)).toEqual(['vendors:read']);
    expect(compact(['vendors:read_list', 'vendors:read', 'vendors:create', 'vendors:update',
      'vendors:delete'], TABLES)).toEqual(['vendors:*']);
  });
});
