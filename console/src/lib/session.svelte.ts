// The operator's session: the admin token (sessionStorage, so it ends with the tab), the
// colour scheme, and the confirmation dialog every schema change goes through.
import type { AdminClient, AppAdmin } from '@authoric/client/admin';
import { adminClient, appAdmin } from './client';

const TOKEN_KEY = 'authoric.adminToken';
const THEME_KEY = 'authoric.theme';

export type Theme = 'system' | 'light' | 'dark';

export const session = $state({
  token: sessionStorage.getItem(TOKEN_KEY) ?? '',
  theme: (localStorage.getItem(THEME_KEY) as Theme | null) ?? 'system',
});

export function signIn(token: string): void {
  session.token = token;
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function signOut(): void {
  session.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
}

export function setTheme(theme: Theme): void {
  session.theme = theme;
  localStorage.setItem(THEME_KEY, theme);
}

/** The platform's administration (`@authoric/client/admin`) with the session's token. */
export function platform(): AdminClient {
  return adminClient(session.token);
}

/** One app's administration with the session's token. */
export function api(app: string): AppAdmin {
  return appAdmin(session.token, app);
}

export interface ConfirmRequest {
  title: string;
  lines: string[];
  action: string;
  danger: boolean;
  resolve: (ok: boolean) => void;
}

export const dialog = $state<{ current: ConfirmRequest | null }>({ current: null });

/** Shows exactly what will change; resolves true when the operator confirms. */
export function confirmChange(title: string, lines: string[], action = 'Apply',
                              danger = false): Promise<boolean> {
  return new Promise((resolve) => {
    dialog.current = {
      title, lines, action, danger,
      resolve: (ok) => {
        dialog.current = null;
        resolve(ok);
      },
    };
  });
}

export const toast = $state<{ message: string; kind: 'info' | 'error' }>({ message: '', kind: 'info' });
let toastTimer: ReturnType<typeof setTimeout> | undefined;

export function notify(message: string, kind: 'info' | 'error' = 'info'): void {
  toast.message = message;
  toast.kind = kind;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (toast.message = ''), kind === 'error' ? 8000 : 3000);
}

export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: string }).code;
    return code ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}
