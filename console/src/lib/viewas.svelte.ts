// "View as": a read-only impersonation token for one member, minted by the admin
// (POST /admin/apps/{app}/impersonate), used on the member's own REST and subscribe routes.
import { api } from './session.svelte';

export interface ViewAs {
  app: string;
  user: string;
  org: string;
  label: string;
  token: string;
  expiresAt: number;
}

export const viewAs = $state<{ current: ViewAs | null }>({ current: null });

const TTL = 600;

export async function startViewAs(app: string, user: string, org: string, label: string): Promise<ViewAs> {
  const body = await api(app).impersonate({ user, org, ttl: TTL });
  viewAs.current = { app, user, org, label, token: body.access_token, expiresAt: Date.now() + body.expires_in * 1000 };
  return viewAs.current;
}

/** The refresh hook for the feed's `reauth`: impersonation tokens cannot be refreshed, so mint anew. */
export async function renewViewAs(): Promise<string | null> {
  const current = viewAs.current;
  if (!current) return null;
  return (await startViewAs(current.app, current.user, current.org, current.label)).token;
}

export function stopViewAs(): void {
  viewAs.current = null;
}
