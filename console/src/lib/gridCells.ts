// How the data grid draws and edits its cells (Tabulator formatters and its one editor): as
// text, never HTML (cell values are whatever tenants wrote); a refused edit and a redacted value
// marked on the cell; a reference cell as a link named by the row it references; the org
// column by the org's name. The grid's state comes in as functions, read when a cell is drawn.
import type { CellComponent, Tabulator } from 'tabulator-tables';
import { cellText } from './display';
import { rowLink, type LabelCache } from './references';

/** A span holding text, never HTML. */
export function textSpan(text: string): HTMLElement {
  const span = document.createElement('span');
  span.textContent = text;
  return span;
}

/** Draws a cell as text, marked when its last edit was refused (`errors`, by `uid:field`) or
 *  its value is redacted. */
export function cellFormatter(errors: ReadonlyMap<string, string>) {
  return (cell: CellComponent): HTMLElement => {
    const el = cell.getElement();
    const message = errors.get(`${cell.getRow().getData().uid}:${cell.getField()}`);
    el.classList.toggle('cell-error', Boolean(message));
    el.title = message ?? '';
    const value = cell.getValue();
    el.classList.toggle('cell-redacted', value === '[redacted]');
    return textSpan(cellText(value));
  };
}

/** Draws a reference to `table` as a link named by the referenced row, once its name is
 *  known (`labels`); as `plain` until then, or when the viewer may not read it. */
export function referenceFormatter(app: string, table: string, labels: () => LabelCache,
                                   plain: (cell: CellComponent) => HTMLElement) {
  return (cell: CellComponent): HTMLElement => {
    const uid = cell.getValue();
    if (typeof uid !== 'string' || !uid) return plain(cell);
    const label = labels().get(table)?.get(uid);
    if (!label) return plain(cell);
    plain(cell); // error and redaction marks
    const link = document.createElement('a');
    link.href = rowLink(app, table, uid);
    link.textContent = label;
    link.title = uid;
    link.className = 'ref-link';
    return link;
  };
}

/** Draws the org column by the org's name (its uid's start when unknown). */
export function orgFormatter(names: () => ReadonlyMap<string, string>) {
  return (cell: CellComponent): HTMLElement => {
    const uid = String(cell.getValue() ?? '');
    return textSpan(names().get(uid) ?? uid.slice(0, 8));
  };
}

/** The grid's text editor: Enter or leaving the cell saves, Escape cancels; the key that ends
 *  the edit stops there (reaching the grid, an Enter would open the editor again), and the
 *  grid takes keys again at once (`grid`, see `acceptKeysAgain`). */
export function textEditor(grid: () => Tabulator | null) {
  return (cell: CellComponent, onRendered: (fn: () => void) => void,
          success: (value: unknown) => void, cancel: (value: unknown) => void): HTMLElement => {
    const input = document.createElement('input');
    input.value = cellText(cell.getValue());
    input.setAttribute('aria-label', `Edit ${cell.getField()}`);
    input.style.width = '100%';
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      if (ok) success(input.value);
      else cancel(cell.getValue());
      acceptKeysAgain(grid());
    };
    onRendered(() => {
      input.focus();
      input.select();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' && e.key !== 'Escape') return;
      e.preventDefault();
      e.stopPropagation();
      finish(e.key === 'Enter');
    });
    input.addEventListener('blur', () => finish(true));
    return input;
  };
}

/** Tabulator's range selection ignores every key for 10 ms after an edit ends (so that the
 *  Enter which saved does not open the editor again) and, on a busy machine, until its timer
 *  runs, which comes after pending key presses: an Enter pressed right after Escape and an
 *  arrow was lost. Our editor keeps its closing key from the grid, so the grid may take keys
 *  at once. (`blockKeydown` is not public; tabulator-tables is pinned, and the keyboard test
 *  in tests/e2e fails if this stops working.) */
export function acceptKeysAgain(grid: Tabulator | null): void {
  const modules = (grid as unknown as { modules?: { selectRange?: { blockKeydown?: boolean } } } | null)?.modules;
  if (modules?.selectRange) modules.selectRange.blockKeydown = false;
}
