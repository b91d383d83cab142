// How many rows match the grid's filter: the planner's estimate that comes with each page of the
// operator's rows (`count=estimate`), the exact count the operator asks for (`count=exact`), or
// the number shown when the whole list fits on one page. Each figure says which it is: an
// estimate is marked `≈` and rounded (or `≥` the rows already paged through, when it is below
// them), an exact count is bare, and names the moment it was taken once live changes may have
// moved it.

/** What is known of the total for the filter on screen. */
export type Total =
  | { state: 'loading' }                                      // a new filter's first page is on its way
  | { state: 'error' }                                        // that page could not be read
  | { state: 'unknown' }                                      // no estimate is offered (a member's view)
  | { state: 'estimate'; rows: number }
  | { state: 'counting'; estimate: number | null }
  | { state: 'exact'; rows: number; at: string; stale: boolean }
  | { state: 'failed'; estimate: number | null; message: string };

/** Where the page on screen sits in the list: rows before it, rows on it, and whether more follow. */
export interface PageSpot { before: number; shown: number; more: boolean }

export interface TotalText {
  /** The figure, e.g. `≈ 12,300 rows`, `12,345 rows`, or empty when nothing true can be said. */
  text: string;
  /** Says where the figure comes from (shown on hover). */
  title: string;
  /** Whether the figure is an exact count (no button needed to get one). */
  exact: boolean;
}

const numbers = new Intl.NumberFormat('en-US');

function rowsWord(n: number): string {
  return `${numbers.format(n)} ${n === 1 ? 'row' : 'rows'}`;
}

/** An estimate as shown: three significant digits from 1,000 (more would claim a precision
 *  the planner does not have). */
export function roughly(estimate: number): number {
  const n = Math.max(Math.round(estimate), 0);
  if (n < 1000) return n;
  const step = 10 ** (Math.floor(Math.log10(n)) - 2);
  return Math.round(n / step) * step;
}

/** The fewest rows the list can hold, judging by the page on screen. */
function seen(spot: PageSpot): number {
  return spot.before + spot.shown + (spot.more ? 1 : 0);
}

/** An estimate, `≈` marked; when the planner guessed fewer rows than the pages already read
 *  hold (its statistics are behind, as after a burst of writes), what those pages prove
 *  instead: `≥`. Either way the figure says it is an estimate, and when it was read (`at`):
 *  a bare `≥ 51 rows` read as a count. */
function estimateText(estimate: number, spot: PageSpot, at: string): TotalText {
  const n = roughly(estimate);
  const least = seen(spot);
  const when = at ? ` · estimate at ${at}` : '';
  return n < least
    ? { text: `≥ ${rowsWord(least)}${when}`, title: `At least the rows paged through: PostgreSQL's estimate (${numbers.format(n)}) is behind, its statistics not yet updated; ${COUNT_HINT}`, exact: false }
    : { text: `≈ ${rowsWord(n)}${when}`, title: `PostgreSQL's estimate for this filter, from the table's statistics; ${COUNT_HINT}`, exact: false };
}

const COUNT_HINT = 'Count rows gives the exact number';

/** The figure for `total`, given where the page on screen sits and when its estimate, if any,
 *  was read (`estimatedAt`, a time of day). */
export function describeTotal(total: Total, spot: PageSpot, estimatedAt = ''): TotalText {
  if (spot.before === 0 && !spot.more && total.state !== 'loading' && total.state !== 'error') {
    // The whole list is on screen: its length is the count.
    return { text: rowsWord(spot.shown), title: 'Every matching row is shown', exact: true };
  }
  switch (total.state) {
    case 'loading':
      return { text: '', title: 'Reading the first page', exact: false };
    case 'error':
      return { text: '', title: 'The rows could not be read', exact: false };
    case 'unknown':
      return { text: '', title: 'No estimate for this view; Count rows counts them', exact: false };
    case 'estimate':
      return estimateText(total.rows, spot, estimatedAt);
    case 'counting':
      return { text: total.estimate === null ? 'counting…' : `${estimateText(total.estimate, spot, estimatedAt).text}, counting…`,
               title: 'Counting every matching row', exact: false };
    case 'failed':
      return total.estimate === null ? { text: 'not counted', title: COUNT_HINT, exact: false } : estimateText(total.estimate, spot, estimatedAt);
    case 'exact':
      return total.stale
        ? { text: `${rowsWord(total.rows)} at ${total.at}`, title: 'Rows have changed since this count; Count rows counts again', exact: false }
        : { text: rowsWord(total.rows), title: `Counted at ${total.at}`, exact: true };
  }
}

/** The estimate `total` holds, if any. */
function estimateOf(total: Total): number | null {
  if (total.state === 'estimate') return total.rows;
  if (total.state === 'counting' || total.state === 'failed') return total.estimate;
  return null;
}

/** `total` once a page of the same filter arrived with `estimate` (undefined: none was asked
 *  for). A count asked for, or already taken, stays; the estimate is refreshed. */
export function withPage(total: Total, estimate: number | undefined): Total {
  const fresh = estimate ?? estimateOf(total);
  switch (total.state) {
    case 'exact':
      return total;
    case 'counting':
      return { ...total, estimate: fresh };
    case 'failed':
      return { ...total, estimate: fresh };
    default:
      return fresh === null ? { state: 'unknown' } : { state: 'estimate', rows: fresh };
  }
}

/** `total` while an exact count is asked for. */
export function counting(total: Total): Total {
  return { state: 'counting', estimate: estimateOf(total) };
}

/** `total` when the exact count failed with `message`: the estimate (still marked) stays. */
export function countFailed(total: Total, message: string): Total {
  return { state: 'failed', estimate: estimateOf(total), message };
}

/** `total` after a live change or a resync: an exact count no longer says how many rows there are. */
export function changed(total: Total): Total {
  return total.state === 'exact' ? { ...total, stale: true } : total;
}
