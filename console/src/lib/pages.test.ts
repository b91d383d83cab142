import { describe, expect, it } from 'vitest';
import { collectPages, pageLine } from './pages';

describe('reading a paged list', () => {
  it('follows next cursors until there is none, in order', async () => {
    const pages: Record<string, { items: number[]; next: string | null }> = {
      '': { items: [1, 2], next: 'a' }, a: { items: [3], next: 'b' }, b: { items: [], next: null },
    };
    const asked: (string | null)[] = [];
    const all = await collectPages(async (after) => {
      asked.push(after);
      return pages[after ?? ''];
    });
    expect([...all]).toEqual([1, 2, 3]);
    expect(all.complete).toBe(true);
    expect(asked).toEqual([null, 'a', 'b']);
  });

  it('stops after the pages asked for and says the list went on', async () => {
    const some = await collectPages(async (after) => ({ items: [after ?? 'first'], next: 'more' }), 2);
    expect([...some]).toEqual(['first', 'more']);
    expect(some.complete).toBe(false);
  });

  it("says how many rows the page shows in words: '1 row', not '1 rows'", () => {
    expect(pageLine(1, 1)).toBe('page 1 · 1 row shown');
    expect(pageLine(2, 0)).toBe('page 2 · 0 rows shown');
    expect(pageLine(3, 50)).toBe('page 3 · 50 rows shown');
  });
});
