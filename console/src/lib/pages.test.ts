import { describe, expect, it } from 'vitest';
import { collectPages } from './pages';

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
    expect(all).toEqual([1, 2, 3]);
    expect(asked).toEqual([null, 'a', 'b']);
  });
});
