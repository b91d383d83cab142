import { describe, expect, it } from 'vitest';
import { condition, emptyGroup, fromJson, parseInput, principalOf, toJson } from './filter';

describe('the filter builder tree', () => {
  it('reads an equality shorthand as one eq condition and writes it back as an operator map', () => {
    const tree = fromJson({ status: 'received' });
    expect(tree.children).toEqual([condition('status', 'eq', 'received')]);
    expect(toJson(tree)).toEqual({ status: { eq: 'received' } });
  });

  it('splits several operators on one column into an and of conditions', () => {
    const tree = fromJson({ amount: { gte: 10, lt: 100 } });
    expect(tree.combinator).toBe('and');
    expect(tree.children).toEqual([condition('amount', 'gte', 10), condition('amount', 'lt', 100)]);
    expect(toJson(tree)).toEqual({ and: [{ amount: { gte: 10 } }, { amount: { lt: 100 } }] });
  });

  it('keeps nested and / or / not groups through a round trip', () => {
    const json = {
      or: [
        { status: { in: ['a', 'b'] } },
        { not: { and: [{ amount: { is_null: true } }, { name: { like: 'A%' } }] } },
      ],
    };
    expect(toJson(fromJson(json))).toEqual(json);
  });

  it('treats a $principal reference as a value, not as an operator map', () => {
    const tree = fromJson({ owner: { $principal: 'uid' } });
    expect(tree.children[0]).toEqual(condition('owner', 'eq', { $principal: 'uid' }));
    expect(principalOf((tree.children[0] as { value: unknown }).value)).toBe('uid');
    expect(toJson(fromJson({ owner: { eq: { $principal: 'org' } } }))).toEqual(
      { owner: { eq: { $principal: 'org' } } });
  });

  it('writes an empty builder, or conditions without a column, as no filter at all', () => {
    expect(toJson(emptyGroup())).toBeNull();
    expect(toJson({ ...emptyGroup(), children: [condition('', 'eq', 'x')] })).toBeNull();
  });

  it('refuses a filter that is not an object', () => {
    expect(() => fromJson([1, 2])).toThrow();
    expect(() => fromJson({ and: 'x' })).toThrow();
  });

  it('reads typed input as the column type needs it', () => {
    expect(parseInput('42', 'eq', 'integer')).toBe(42);
    expect(parseInput('12.50', 'eq', 'numeric')).toBe('12.50');
    expect(parseInput('a, b ,c', 'in')).toEqual(['a', 'b', 'c']);
    expect(parseInput('true', 'is_null')).toBe(true);
    expect(parseInput('false', 'eq', 'boolean')).toBe(false);
  });
});
