// The column types a table may use and the conversions between them, read once from the
// server (GET /admin/column-types) rather than copied here: what the console offers is what
// the server takes.
import type { ColumnTypes } from '@authoric/client/admin';
import { platform } from './session.svelte';

export const columnTypes = $state<{ current: ColumnTypes | null; error: string }>({ current: null, error: '' });

let loading: Promise<void> | null = null;

/** Reads the lists unless they are read already (or being read). */
export function loadColumnTypes(): Promise<void> {
  loading ??= platform().columnTypes().then(
    (read) => { columnTypes.current = read; columnTypes.error = ''; },
    (e: unknown) => { loading = null; columnTypes.error = e instanceof Error ? e.message : String(e); });
  return loading;
}
