// Reading every page of a keyset-paged list (`{"items", "next"}`, contract sections 2 and 4).
import type { Page } from './types';

/** Every item of a paged list: `fetchPage(after)` from no cursor until `next` is null. */
export async function collectPages<T>(fetchPage: (after: string | null) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let after: string | null = null;
  do {
    const page: Page<T> = await fetchPage(after);
    items.push(...page.items);
    after = page.next ?? null;
  } while (after);
  return items;
}
