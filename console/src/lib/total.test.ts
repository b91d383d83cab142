import { describe, expect, it } from 'vitest';
import { changed, countFailed, counting, describeTotal, roughly, withPage, type PageSpot, type Total } from './total';

const middle: PageSpot = { before: 50, shown: 50, more: true };
const whole: PageSpot = { before: 0, shown: 3, more: false };

describe("the grid's total", () => {
  it('shows an estimate marked ≈ and rounded to three digits', () => {
    expect(describeTotal({ state: 'estimate', rows: 12_287 }, middle)).toMatchObject({ text: '≈ 12,300 rows', exact: false });
    expect(describeTotal({ state: 'estimate', rows: 987 }, middle).text).toBe('≈ 987 rows');
    expect(describeTotal({ state: 'estimate', rows: 101 }, middle).text).toBe('≈ 101 rows');
    expect(roughly(1_234_567)).toBe(1_230_000);
    expect(roughly(99_951)).toBe(100_000);
    expect(roughly(-3)).toBe(0);
  });

  it('says "at least" the rows already paged through when the planner guessed fewer', () => {
    // Two full pages and a next one: at least 101 rows, whatever stale statistics say.
    expect(describeTotal({ state: 'estimate', rows: 1 }, middle)).toMatchObject({ text: '≥ 101 rows', exact: false });
    expect(describeTotal({ state: 'estimate', rows: 100.4 }, middle).text).toBe('≥ 101 rows');
  });

  it('shows an exact count without ≈, and says when live changes may have moved it', () => {
    const exact: Total = { state: 'exact', rows: 12_345, at: '14:02:03', stale: false };
    expect(describeTotal(exact, middle)).toMatchObject({ text: '12,345 rows', exact: true });
    expect(describeTotal({ ...exact, rows: 1 }, middle).text).toBe('1 row');
    expect(describeTotal(changed(exact), middle)).toMatchObject({ text: '12,345 rows at 14:02:03', exact: false });
    expect(changed({ state: 'estimate', rows: 5 })).toEqual({ state: 'estimate', rows: 5 });
  });

  it('counts the rows on screen when the whole list fits on one page, whatever the planner guessed', () => {
    expect(describeTotal({ state: 'estimate', rows: 1000 }, whole)).toMatchObject({ text: '3 rows', exact: true });
    expect(describeTotal({ state: 'unknown' }, { ...whole, shown: 0 })).toMatchObject({ text: '0 rows', exact: true });
  });

  it('says nothing while a new filter loads or when its page failed, and nothing is claimed as a count', () => {
    for (const state of ['loading', 'error'] as const) {
      expect(describeTotal({ state }, whole)).toMatchObject({ text: '', exact: false });
      expect(describeTotal({ state }, middle)).toMatchObject({ text: '', exact: false });
    }
    expect(describeTotal({ state: 'unknown' }, middle)).toMatchObject({ text: '', exact: false });
  });

  it('keeps the estimate marked while counting and after a failed count', () => {
    const busy = counting({ state: 'estimate', rows: 12_287 });
    expect(describeTotal(busy, middle).text).toBe('≈ 12,300 rows, counting…');
    expect(describeTotal(counting({ state: 'unknown' }), middle).text).toBe('counting…');
    const failed = countFailed(busy, 'statement timeout');
    expect(failed).toEqual({ state: 'failed', estimate: 12_287, message: 'statement timeout' });
    expect(describeTotal(failed, middle)).toMatchObject({ text: '≈ 12,300 rows', exact: false });
    expect(describeTotal(countFailed({ state: 'unknown' }, 'x'), middle).text).toBe('not counted');
  });

  it('takes the estimate of each new page of the same filter but keeps a count asked for or taken', () => {
    expect(withPage({ state: 'loading' }, 40)).toEqual({ state: 'estimate', rows: 40 });
    expect(withPage({ state: 'loading' }, undefined)).toEqual({ state: 'unknown' });
    expect(withPage({ state: 'estimate', rows: 40 }, 44)).toEqual({ state: 'estimate', rows: 44 });
    expect(withPage({ state: 'estimate', rows: 40 }, undefined)).toEqual({ state: 'estimate', rows: 40 });
    expect(withPage({ state: 'counting', estimate: 40 }, 44)).toEqual({ state: 'counting', estimate: 44 });
    const exact: Total = { state: 'exact', rows: 41, at: 't', stale: false };
    expect(withPage(exact, 44)).toBe(exact);
  });

  it('says that a figure is an estimate and when it was read, so a stale "≥" is not taken for a count', () => {
    // After a burst: statistics say 0 rows, the first page holds 50 and more follow.
    const first: PageSpot = { before: 0, shown: 50, more: true };
    expect(describeTotal({ state: 'estimate', rows: 0 }, first, '14:02:03').text).toBe('≥ 51 rows · estimate at 14:02:03');
    expect(describeTotal({ state: 'estimate', rows: 12_287 }, middle, '14:02:03').text).toBe('≈ 12,300 rows · estimate at 14:02:03');
    expect(describeTotal(counting({ state: 'estimate', rows: 12_287 }), middle, '14:02:03').text)
      .toBe('≈ 12,300 rows · estimate at 14:02:03, counting…');
    // An exact count, or the whole list on screen, is no estimate.
    expect(describeTotal({ state: 'estimate', rows: 1000 }, whole, '14:02:03').text).toBe('3 rows');
  });
});
