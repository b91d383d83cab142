// Reading every page of a keyset-paged list (`{"items", "next"}`, contract sections 2 and 4).
import type { Page } from './types';

/** Every item of a paged list: `fetchPage(after)` from no cursor until `next` is null (or,
 *  given `maxPages`, until that many pages are read; `complete` says whether the list ended). */
export async function collectPages<T>(fetchPage: (after: string | null) => Promise<Page<T>>,
                                      maxPages = Infinity): Promise<T[] & { complete?: boolean }> {
  const items: T[] & { complete?: boolean } = [];
  let after: string | null = null;
  let pages = 0;
  do {
    const page: Page<T> = await fetchPage(after);
    items.push(...page.items);
    after = page.next ?? null;
    pages += 1;
  } while (after && pages < maxPages);
  items.complete = after === null;
  return items;
}

/** The pager's line: which page, and how many rows it shows, counted in words a person reads
 *  (`1 row`, `2 rows`). */
export function pageLine(page: number, shown: number): string {
  return `page ${page} · ${shown} ${shown === 1 ? 'row' : 'rows'} shown`;
}
